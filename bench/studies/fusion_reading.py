"""The reading half of ``bench/studies/fusion_choice.py --read K``: each question's K best hybrid
passages read once, then F1 by passages read and by the retrieval weight of the choice
across passages (margin + w x fused score), and the two-step lead (the best passage first,
the others when its lead is under a cut-off), as ``bench/open_choice.py`` measures for BM25.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qa_finetune.decoding.across_passages import choose_across_passages, is_confident
from qa_finetune.evaluation.passage_readings import passage_readings
from qa_finetune.modeling.for_answering import load_for_answering
from qa_finetune.modeling.scoring import references, score

WEIGHTS = (0.0, 2.0, 4.0, 6.0)
# (choice, lead): the retrieval weights of the choice across passages and of the two-step lead
# whose reading is shown.
TWO_STEP_WEIGHTS = ((2.0, 2.0), (2.0, 4.0), (4.0, 4.0))


def print_reading(
    args: Any, questions: list[dict], index: Any, passages: np.ndarray, encoder: Any
) -> None:
    """Print the two tables for the hybrid ranking the index holds."""
    index.add_vectors(passages, encoder)
    found = [index.search(q["question"], args.read) for q in questions]
    loaded = load_for_answering(args.model, tune_batch=True)
    readings = passage_readings(loaded, questions, found, 0)
    gold = references(questions)
    runner_up = {
        q["id"]: hits[1].score if len(hits) > 1 else None
        for q, hits in zip(questions, found, strict=True)
    }

    def f1(k: int, weight: float) -> float:
        answers = {}
        for question_id, read in readings.items():
            chosen = choose_across_passages([r for r in read if r.passage < k], 0.0, False, weight)
            answers[question_id] = chosen[0][0].text if chosen else ""
        return score(answers, gold, False)["f1"]

    print(f"\nhybrid (BM25 + 10 x cosine), {len(questions)} questions, {args.read} read")
    print("| K | " + " | ".join(f"margin + {w:g} x fused" for w in WEIGHTS) + " |")
    print("|---|" + "---|" * len(WEIGHTS))
    for k in (1, 2, 3, 5):
        if k <= args.read:
            print(f"| {k} | " + " | ".join(f"{f1(k, w):.2f}" for w in WEIGHTS) + " |")
    print(
        "\n| K | retrieval weight: choice / lead | confident at | F1 | F1 even / odd questions "
        "| settled by 1 passage | passages read (mean) |"
    )
    print("|---|---|---|---|---|---|---|")
    order = [q["id"] for q in questions]
    for weight, lead_weight in TWO_STEP_WEIGHTS:
        for margin in (None, 12.0, 16.0, 20.0, 24.0):
            answers, reads = {}, []
            for question_id, read in readings.items():
                first = [r for r in read if r.passage == 0]
                available = len({r.passage for r in read})
                settled = margin is not None and is_confident(
                    first, 0.0, False, margin, runner_up[question_id], lead_weight
                )
                kept = first if settled else read
                reads.append(1 if settled else max(available, 1))
                chosen = choose_across_passages(kept, 0.0, False, weight)
                answers[question_id] = chosen[0][0].text if chosen else ""
            share = 100.0 * sum(r == 1 for r in reads) / len(reads)
            shown = "all at once" if margin is None else f"{margin:g}"
            halves = " / ".join(f"{half_f1(answers, gold, order[p::2]):.2f}" for p in (0, 1))
            print(
                f"| {args.read} | {weight:g} / {lead_weight:g} | {shown} "
                f"| {score(answers, gold, False)['f1']:.2f} | {halves} | {share:.0f}% "
                f"| {sum(reads) / len(reads):.2f} |"
            )


def half_f1(answers: dict[str, str], gold: dict[str, list[str]], ids: list[str]) -> float:
    """F1 of the answers to the questions ``ids`` only."""
    return score({i: answers[i] for i in ids}, {i: gold[i] for i in ids}, False)["f1"]
