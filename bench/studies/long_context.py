"""A long-document question-answering set from real text: each article's paragraphs joined into
one context, so every question is asked of thousands of words.

    .venv/bin/python bench/studies/long_context.py ../shared/data/squadshifts-new-wiki.json \\
        --output-dir /tmp/long-context --heldout-articles 8 --train-questions 300 \\
        --heldout-questions 150

Writes ``train.json`` and ``heldout.json`` (SQuAD v1.1 layout), split by article so that no
document is in both, each answer's ``answer_start`` moved to its place in the joined text and
checked (``context[start:start + len(text)] == text``). ``--train-questions`` and
``--heldout-questions`` draw that many questions (seeded) to fit a CPU budget; the contexts stay
whole. Prints the words per context and the questions kept.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path
from typing import Any

from qa_finetune.data.whole_documents import join_documents


def join_article(article: dict[str, Any]) -> dict[str, Any]:
    """One paragraph holding the article's whole text and all its questions, offsets moved:
    the paragraphs joined as ``data.whole_documents`` joins a document's."""
    title = article.get("title", "")
    contexts = [{"title": title, "context": p["context"]} for p in article["paragraphs"]]
    document = join_documents(contexts)[title]
    questions = []
    for paragraph in article["paragraphs"]:
        shift = document.starts[paragraph["context"]]
        for qa in paragraph["qas"]:
            answers = [
                {"text": a["text"], "answer_start": a["answer_start"] + shift}
                for a in qa["answers"]
            ]
            questions.append({**qa, "answers": answers})
    for qa in questions:
        for answer in qa["answers"]:
            start = answer["answer_start"]
            if document.text[start : start + len(answer["text"])] != answer["text"]:
                raise ValueError(f"question {qa['id']}: the answer moved off its text")
    return {"title": title, "paragraphs": [{"context": document.text, "qas": questions}]}


def keep_questions(articles: list[dict[str, Any]], count: int | None, seed: int) -> list[dict]:
    """The articles with ``count`` of their questions in all, drawn at random (seeded)."""
    if count is None:
        return articles
    every = [(a, q["id"]) for a, art in enumerate(articles) for q in art["paragraphs"][0]["qas"]]
    chosen = {qid for _, qid in random.Random(seed).sample(every, min(count, len(every)))}
    kept = []
    for article in articles:
        paragraph = article["paragraphs"][0]
        qas = [qa for qa in paragraph["qas"] if qa["id"] in chosen]
        if qas:
            kept.append({**article, "paragraphs": [{"context": paragraph["context"], "qas": qas}]})
    return kept


def describe(name: str, articles: list[dict[str, Any]]) -> str:
    words = [len(a["paragraphs"][0]["context"].split()) for a in articles]
    questions = sum(len(a["paragraphs"][0]["qas"]) for a in articles)
    return (
        f"{name}: {len(articles)} articles, {questions} questions, words per context "
        f"median {statistics.median(words):.0f} (min {min(words)}, max {max(words)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "source", type=Path, help="a SQuAD file with several paragraphs per article"
    )
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--heldout-articles", type=int, default=8)
    parser.add_argument("--train-questions", type=int, default=None)
    parser.add_argument("--heldout-questions", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    articles = [join_article(a) for a in json.loads(args.source.read_text("utf-8"))["data"]]
    random.Random(args.seed).shuffle(articles)
    heldout = keep_questions(articles[: args.heldout_articles], args.heldout_questions, args.seed)
    train = keep_questions(articles[args.heldout_articles :], args.train_questions, args.seed)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", train), ("heldout", heldout)):
        payload = {"version": "long-context", "data": part}
        (args.output_dir / f"{name}.json").write_text(json.dumps(payload), encoding="utf-8")
        print(describe(name, part))


if __name__ == "__main__":
    main()
