"""Whether a long document's best passage could be read first and the others only when the
reader is not sure of it, as ``ask --index`` reads a collection: the same answers from fewer
passages, on one reading.

    PYTHONPATH=$PWD .venv/bin/python bench/studies/long_document_two_step.py \\
        ../shared/data/squad-v1.1-dev.json --model ../shared/models/minilm-31k \\
        --questions 300 --choose-on 1700 --cache outputs/study/chooser-readings.pkl

The long-document check's questions and the next ``--choose-on`` of the same draw (to choose
the margin on), each question's 5 best BM25 passages read once (the reading, and its cache,
of ``learned_chooser.py``). For a margin M, the best passage alone answers when its lead is at
least M (``decoding.across_passages.is_confident``: its best span's margin over "no answer"
plus 2 x its BM25 lead over the second passage, the product's weight for long contexts);
otherwise the answer is the product's choice across all ``--passages``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from bench.long_documents import check_and_others, read_or_reuse
from qa_finetune.decoding.across_passages import (
    PassageReading,
    choose_across_passages,
    is_confident,
)
from qa_finetune.decoding.long_context_choice import RETRIEVAL_WEIGHT
from qa_finetune.metrics import squad_v1

CANDIDATES = 10  # as learned_chooser.py reads, so that one cache serves both
MARGINS = (8.0, 12.0, 16.0, 20.0, 24.0)


def two_step_answer(
    hits: list[Any], readings: list[PassageReading], passages: int, margin: float | None
) -> tuple[str, int]:
    """The answer from the first ``passages`` passages, and how many were read: the best
    passage alone when it is confident by ``margin`` (None: never), else all of them."""
    usable = [r for r in readings if r.passage < passages]
    first = [r for r in usable if r.passage == 0]
    if margin is not None and len(hits) > 1 and first:
        runner_up = hits[1].score
        if is_confident(first, 0.0, False, margin, runner_up, RETRIEVAL_WEIGHT):
            chosen = choose_across_passages(first, 0.0, False, RETRIEVAL_WEIGHT)
            return chosen[0][0].text, 1
    chosen = choose_across_passages(usable, 0.0, False, RETRIEVAL_WEIGHT)
    return (chosen[0][0].text if chosen else ""), min(passages, len(hits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--choose-on", type=int, default=1700)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--passages", type=int, default=3)
    parser.add_argument("--most", type=int, default=5, help="passages read into the cache")
    parser.add_argument("--cache", type=Path, help="keep the reading here, and reuse it")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    drawn, check_ids = check_and_others(args.data, args.questions, args.choose_on, args.seed)
    key = [str(args.data), args.model, args.questions, args.choose_on, args.seed]
    found, readings = read_or_reuse(args.model, drawn, args.most, CANDIDATES, args.cache, key)
    # Each question's answer with all its passages read: what every margin is compared with.
    reading_all = [
        two_step_answer(hits, reading, args.passages, None)[0]
        for hits, reading in zip(found, readings, strict=True)
    ]
    print(machine_line())
    rows = []
    for margin in (None, *MARGINS):
        row: dict[str, Any] = {"margin": margin}
        for part in ("choose-on", "check"):
            predictions, gold, read, same = {}, {}, [], []
            for q, hits, reading, all_read in zip(drawn, found, readings, reading_all, strict=True):
                if (q["id"] in check_ids) != (part == "check"):
                    continue
                answer, count = two_step_answer(hits, reading, args.passages, margin)
                predictions[q["id"]] = answer
                gold[q["id"]] = list(q["answers"]["text"])
                read.append(count)
                same.append(answer == all_read)
            row[f"F1, {part}"] = round(squad_v1(predictions, gold)["f1"], 2)
            row[f"passages read, {part}"] = round(float(np.mean(read)), 2)
            row[f"answers as reading all, {part} %"] = round(100 * float(np.mean(same)), 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.output:
        payload = {"machine": machine_line(), "passages": args.passages, "rows": rows}
        args.output.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
