"""A fixed random subset of a SQuAD-format file's questions (seeded), written as SQuAD JSON:
for measuring on a shared machine where the whole file takes too long. Every paragraph keeps
only its chosen questions; paragraphs left without any are dropped.

    python bench/question_subset.py ../shared/data/subjqa-dev.json 800 outputs/subjqa-dev-800.json
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("count", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    squad = json.loads(args.data.read_text(encoding="utf-8"))
    ids = [q["id"] for a in squad["data"] for p in a["paragraphs"] for q in p["qas"]]
    chosen = set(random.Random(args.seed).sample(ids, min(args.count, len(ids))))
    for article in squad["data"]:
        for paragraph in article["paragraphs"]:
            paragraph["qas"] = [q for q in paragraph["qas"] if q["id"] in chosen]
        article["paragraphs"] = [p for p in article["paragraphs"] if p["qas"]]
    squad["data"] = [a for a in squad["data"] if a["paragraphs"]]
    args.out.write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
    unanswerable = sum(
        1 for a in squad["data"] for p in a["paragraphs"] for q in p["qas"] if not q["answers"]
    )
    print(f"{args.out}: {len(chosen)} questions ({unanswerable} without an answer)")


if __name__ == "__main__":
    main()
