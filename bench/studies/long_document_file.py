"""The long-document check as a data file, for ``evaluate`` and ``calibrate``: the questions of
``bench/long_documents.py`` (SQuAD v1.1 dev questions asked of their whole article, seeded),
written as JSON Lines records.

    python bench/studies/long_document_file.py ../shared/data/squad-v1.1-dev.json \\
        --questions 300 --seed 0 --output outputs/long-documents-300.jsonl
    qa-finetune evaluate --model RUN --data outputs/long-documents-300.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Run as a script from anywhere: the repository root holds the bench package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.long_documents import long_document_questions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="a SQuAD file whose titles have several paragraphs")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    questions = long_document_questions(args.data, args.questions, args.seed)
    lines = [json.dumps(q, ensure_ascii=False) for q in questions]
    args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    articles = len({q["title"] for q in questions})
    print(f"{args.output}: {len(questions)} questions of {articles} whole articles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
