"""``ask`` latency on a 200 KB document: every window read against the best passages read,
side by side in one process, the two alternating so that a busy machine slows both alike.

    PYTHONPATH=$PWD .venv/bin/python bench/long_document_latency.py \\
        ../shared/data/squad-v1.1-dev.json --model ../shared/models/minilm-31k --repeats 2

The document is SQuAD v1.1 dev articles joined (paragraphs by a blank line, articles too)
until it holds ``--chars`` characters; the question is one of the middle article's, so its
answer is far from either end. Each repeat times ``QuestionAnswerer.answer`` (what ``ask``
runs once the model is loaded) with ``--read-all`` and then without, after one untimed call
that warms the model up. Prints the seconds of each call, the medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench._machine import machine_line
from qa_finetune.retrieval.long_contexts import LongContexts


def document(data: Path, chars: int) -> tuple[str, str, str]:
    """(text, question, gold answer): articles joined up to ``chars`` characters, and the
    first question of the middle article."""
    articles = json.loads(data.read_text(encoding="utf-8"))["data"]
    texts, used = [], 0
    for article in articles:
        text = "\n\n".join(p["context"] for p in article["paragraphs"])
        texts.append((text, article))
        used += len(text) + 2
        if used >= chars:
            break
    middle = texts[len(texts) // 2][1]["paragraphs"][0]["qas"][0]
    return (
        "\n\n".join(t for t, _ in texts)[:chars],
        middle["question"],
        middle["answers"][0]["text"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--chars", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    from qa_finetune.inference.answerer import QuestionAnswerer

    text, question, gold = document(args.data, args.chars)
    print(machine_line())
    print(f"document: {len(text):,} characters, {len(text.split()):,} words; {question!r}")
    answerer = QuestionAnswerer.load(args.model)
    ways = {"read-all": LongContexts(read_all=True), "passages": LongContexts()}
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    answerer.answer(question, text)  # warms the model up (its graph traced), untimed
    for _ in range(args.repeats):
        for way, setting in ways.items():
            answerer.long_contexts = setting
            began = time.perf_counter()
            [best] = answerer.answer(question, text)
            took = time.perf_counter() - began
            assert text[best["start"] : best["end"]] == best["answer"]
            seconds[way].append(took)
            print(f"  {way}: {took:.2f} s, {best['answer']!r} (gold {gold!r})", flush=True)
    medians = {way: statistics.median(values) for way, values in seconds.items()}
    ratio = medians["read-all"] / medians["passages"]
    print(json.dumps({"median_seconds": medians, "speedup": round(ratio, 1)}))


if __name__ == "__main__":
    main()
