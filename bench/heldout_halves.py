"""Cut a held-out JSON Lines file (``bench/studies/heldout_split.py``) into two seeded halves by
question, a question and its negatives ("<id>#negative", "<id>#swap") always in the same half,
and keep only a seeded share of each half's question-level negatives (swaps are all kept): for
fitting a calibration on one half with a chosen share of unanswerable questions and judging it
on the other.

    python bench/heldout_halves.py outputs/general-heldout-all-negatives.jsonl \\
        outputs/general-half --keep-negatives 0.3 --keep-negatives 1.0
    # writes outputs/general-half-a-0.3.jsonl, -b-0.3.jsonl, -a-1.0.jsonl, -b-1.0.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from qa_finetune.data.question_negatives import SUFFIX


def base(question_id: str) -> str:
    """The id of the question a negative was made from (its own id for an original)."""
    return question_id.split("#")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("prefix")
    parser.add_argument("--keep-negatives", type=float, action="append", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines()]
    bases = sorted({base(row["id"]) for row in rows})
    first = set(random.Random(args.seed).sample(bases, len(bases) // 2))
    for share in args.keep_negatives:
        for half, name in ((True, "a"), (False, "b")):
            part = [r for r in rows if (base(r["id"]) in first) == half]
            negatives = sorted(r["id"] for r in part if SUFFIX in r["id"])
            count = round(share * len(negatives))
            kept = set(random.Random(args.seed + 1).sample(negatives, count))
            part = [r for r in part if SUFFIX not in r["id"] or r["id"] in kept]
            out = Path(f"{args.prefix}-{name}-{share}.jsonl")
            out.write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
            unanswerable = sum(1 for r in part if not r["answers"]["text"])
            print(f"{out}: {len(part)} questions, {unanswerable} without an answer")


if __name__ == "__main__":
    main()
