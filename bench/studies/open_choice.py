"""How to choose one answer across passages, measured: F1 by the score passages compete on
and by passages read, from one reading of the top ``--depth`` passages per question.

    .venv/bin/python bench/studies/open_choice.py --model ../shared/models/minilm-31k \\
        --data outputs/general-heldout.jsonl --questions 600

Each question is searched among all the file's contexts (as `evaluate --open` does) and its
``--depth`` best passages are read once; every (score, K) cell then re-decides from the same
readings, so the cells differ only in the choice. Choose on held-out training questions
(``bench/studies/heldout_split.py`` writes them), never on a test set.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from qa_finetune.decoding.across_passages import (
    PassageReading,
    choose_across_passages,
    is_confident,
)
from qa_finetune.evaluation import evaluate as plain
from qa_finetune.evaluation.open_evaluation import (
    _readings,
    collection_of,
    retrieval_recall,
    spread_sample,
)
from qa_finetune.modeling.for_answering import load_for_answering
from qa_finetune.modeling.scoring import references, score

WEIGHTS = (0.0, 1.0, 2.0, 3.0, 4.0, 6.0)
KS = (1, 2, 3, 5, 7, 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--questions", type=int, default=600)
    parser.add_argument("--depth", type=int, default=10)
    args = parser.parse_args()
    everything = plain.load_examples(args.data, None)
    questions = spread_sample(everything.records, args.questions)
    index, numbers = collection_of(everything.records)
    recall, found = retrieval_recall(index, questions, numbers, max(20, args.depth))
    loaded = load_for_answering(args.model, tune_batch=True)
    # One reading of each question's ``--depth`` best passages, as `evaluate --open` reads.
    readings = _readings(loaded, questions, [hits[: args.depth] for hits in found], 0)
    gold = references(questions)
    print(machine_line())
    print(f"{args.data}: {len(questions)} questions, {len(index)} passages; {json.dumps(recall)}")

    def f1(k: int, weight: float, margin: bool) -> float:
        answers = {}
        for question_id, found_readings in readings.items():
            kept = [r for r in found_readings if r.passage < k]
            if not margin:  # the span score alone: no null, no retrieval
                kept = [
                    PassageReading(r.passage, r.text, r.start, r.end, r.span_score, 0.0)
                    for r in kept
                ]
            chosen = choose_across_passages(kept, 0.0, False, weight)
            answers[question_id] = chosen[0][0].text if chosen else ""
        return score(answers, gold, False)["f1"]

    header = ["K", "span score"] + [f"margin + {w:g} x BM25" for w in WEIGHTS]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for k in KS:
        if k > args.depth:
            continue
        cells = [f"{f1(k, 0.0, False):.2f}"] + [f"{f1(k, w, True):.2f}" for w in WEIGHTS]
        print(f"| {k} | " + " | ".join(cells) + " |")
    runner_up = {
        q["id"]: hits[1].score if len(hits) > 1 else None
        for q, hits in zip(questions, found, strict=True)
    }
    print_two_steps(readings, gold, runner_up)


def print_two_steps(
    readings: dict[str, list[PassageReading]], gold: dict, runner_up: dict[str, float | None]
) -> None:
    """Reading the best passage first and the others only when it is not confident: F1,
    the share of questions settled by one passage, and passages read on average; the
    first passage's lead counted as its margin alone, or with its retrieval score's lead
    over the second passage's (``runner_up``)."""
    print("\n| K | lead | confident at | F1 | settled by 1 passage | passages read (mean) |")
    print("|---|---|---|---|---|---|")
    for k in (3, 5):
        for with_retrieval in (False, True):
            for margin in (None, 10.0, 12.0, 14.0, 16.0, 20.0, 24.0):
                if margin is None and with_retrieval:
                    continue
                answers, reads = {}, []
                for question_id, found in readings.items():
                    first = [r for r in found if r.passage == 0]
                    available = len({r.passage for r in found if r.passage < k})
                    second = runner_up[question_id] if with_retrieval else None
                    settled = margin is not None and is_confident(first, 0.0, False, margin, second)
                    kept = first if settled else [r for r in found if r.passage < k]
                    reads.append(1 if settled else max(available, 1))
                    chosen = choose_across_passages(kept, 0.0, False)
                    answers[question_id] = chosen[0][0].text if chosen else ""
                shown = "all at once" if margin is None else f"{margin:g}"
                lead = "margin + 4 x BM25 lead" if with_retrieval else "margin"
                share = 100.0 * sum(r == 1 for r in reads) / len(reads)
                f1 = score(answers, gold, False)["f1"]
                print(
                    f"| {k} | {lead} | {shown} | {f1:.2f} | {share:.0f}% | "
                    f"{sum(reads) / len(reads):.2f} |"
                )


if __name__ == "__main__":
    main()
