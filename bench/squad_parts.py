"""A long evaluation in parts that each land on disk: split a SQuAD-format file into N files of
consecutive whole articles (about equal question counts), evaluate each part on its own, then
merge the parts' predictions and score them once on the whole file with the official scorer.

    .venv/bin/python bench/squad_parts.py split ../shared/data/squad-v1.1-dev.json 4 /tmp/devparts
    # qa-finetune evaluate --model RUN --data /tmp/devparts/part-1.json --report-dir RUN/eval-part-1
    # ... one per part, then:
    .venv/bin/python bench/squad_parts.py merge RUN/eval-part-*/predictions.json \\
        --out RUN/parts.json
    qa-finetune evaluate --predictions RUN/parts.json \\
        --data ../shared/data/squad-v1.1-dev.json --report-dir RUN/eval

Whole articles keep every question with its own paragraphs, so a part's windows and answers are
the ones the whole file gives; a session that ends early keeps the parts already scored.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.evaluation.prediction_files import read_predictions


def question_count(article: dict[str, Any]) -> int:
    """How many questions an article of a SQuAD-format file holds."""
    return sum(len(paragraph["qas"]) for paragraph in article["paragraphs"])


def split_articles(articles: list[dict[str, Any]], parts: int) -> list[list[dict[str, Any]]]:
    """``articles`` in ``parts`` runs of consecutive articles: a run closes once the questions
    so far reach its share of the total (the last run takes the rest)."""
    total = sum(question_count(article) for article in articles)
    runs: list[list[dict[str, Any]]] = [[]]
    seen = 0
    for article in articles:
        runs[-1].append(article)
        seen += question_count(article)
        if len(runs) < parts and seen >= total * len(runs) / parts:
            runs.append([])
    return [run for run in runs if run]


def merge_predictions(paths: list[Path]) -> dict[str, str]:
    """The union of official predictions files (each read and checked as ``evaluate
    --predictions`` reads it); an id answered in two files is an error."""
    merged: dict[str, str] = {}
    for path in paths:
        answers = read_predictions(path)
        twice = merged.keys() & answers.keys()
        if twice:
            raise SystemExit(f"{path}: {len(twice)} ids already answered in an earlier part")
        merged.update(answers)
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    split = commands.add_parser("split", help="Write DATA as N files of whole articles.")
    split.add_argument("data", type=Path)
    split.add_argument("parts", type=int)
    split.add_argument("out_dir", type=Path)
    merge = commands.add_parser("merge", help="Join the parts' predictions.json files.")
    merge.add_argument("predictions", type=Path, nargs="+")
    merge.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "split":
        squad = json.loads(args.data.read_text(encoding="utf-8"))
        args.out_dir.mkdir(parents=True, exist_ok=True)
        for number, run in enumerate(split_articles(squad["data"], args.parts), start=1):
            path = args.out_dir / f"part-{number}.json"
            path.write_text(json.dumps({"version": squad.get("version"), "data": run}))
            print(f"{path}: {len(run)} articles, {sum(map(question_count, run))} questions")
        return
    try:
        merged = merge_predictions(args.predictions)
    except QAFinetuneError as exc:  # a part that is not an official predictions file: one line
        raise SystemExit(str(exc)) from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(merged, ensure_ascii=False), encoding="utf-8")
    print(f"{args.out}: {len(merged)} answers from {len(args.predictions)} files")


if __name__ == "__main__":
    main()
