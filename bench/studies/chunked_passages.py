"""Whether embedding a passage as several overlapping windows (its score: the best window's
cosine) finds the gold paragraph more often than one vector of its first 256 tokens, on the
held-out general questions (never a test set), fused with BM25 by a grid of weights.

    python bench/studies/chunked_passages.py --data outputs/general-heldout.jsonl --questions 600

Settings are chosen on the even-numbered questions of the 600 (0, 2, 4, ...) and reported on
the odd-numbered ones and on all 600. ``bench/studies/heldout_split.py`` writes the file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from qa_finetune.evaluation import evaluate as plain
from qa_finetune.evaluation.open_evaluation import collection_of, spread_sample
from qa_finetune.modeling.embedding_cache import encode_cached
from qa_finetune.modeling.sentence_encoder import SentenceEncoder

AT = (1, 5, 20)
WEIGHTS = (5.0, 7.5, 10.0, 12.5, 15.0, 20.0)
WINDOWS = ((128, 64), (64, 32))


def windows(tokenizer, text: str, size: int, stride: int) -> list[str]:
    """The text of each window of ``size`` tokens, ``stride`` apart (one for a short text)."""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)[
        "offset_mapping"
    ]
    if len(offsets) <= size:
        return [text]
    starts = [*range(0, len(offsets) - size, stride), len(offsets) - size]
    return [text[offsets[s][0] : offsets[s + size - 1][1]] for s in starts]


def recall(scores: np.ndarray, gold: np.ndarray) -> list[float]:
    """Recall@1/5/20 of ``gold`` under ``scores`` [questions, passages] (ties: lower number)."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, : max(AT)]
    found = [[g in row[:k] for row, g in zip(order, gold, strict=True)] for k in AT]
    return [100.0 * float(np.mean(f)) for f in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--questions", type=int, default=600)
    args = parser.parse_args()
    everything = plain.load_examples(args.data, None)
    questions = spread_sample(everything.records, args.questions)
    index, numbers = collection_of(everything.records)
    encoder = SentenceEncoder.load()
    gold = np.array([numbers[q["context"]] for q in questions])
    asked = encoder.encode([q["question"] for q in questions])
    bm25 = np.stack(
        [index.scores.scores(index.tokenizer.terms([q["question"]])[0]) for q in questions]
    )
    dense = {"whole passage (first 256 tokens)": asked @ encode_cached(encoder, index.texts).T}
    for size, stride in WINDOWS:
        texts, owner = [], []
        for number, text in enumerate(index.texts):
            found = windows(encoder.tokenizer, text, size, stride)
            texts.extend(found)
            owner.extend([number] * len(found))
        vectors = encode_cached(encoder, texts)
        by_window = asked @ vectors.T
        best = np.full((len(questions), len(index)), -1.0, dtype=np.float32)
        np.maximum.at(best.T, np.asarray(owner), by_window.T)
        dense[f"best of {size}-token windows, stride {stride} ({len(texts)} windows)"] = best
        whole = dense["whole passage (first 256 tokens)"]
        dense[f"mean of whole and best {size}-token window"] = (whole + best) / 2
    print(machine_line())
    print(f"{args.data}: {len(questions)} questions, {len(index)} passages")
    even, odd = np.arange(0, len(questions), 2), np.arange(1, len(questions), 2)
    rows = [("BM25", bm25)]
    for name, cosine in dense.items():
        rows.append((f"dense: {name}", cosine))
        rows.extend((f"BM25 + {w:g} x {name}", bm25 + w * cosine) for w in WEIGHTS)
    print("| retrieval | even (choosing) @1 / @5 / @20 | odd @1 / @5 / @20 | all @1 / @5 / @20 |")
    print("|---|---|---|---|")
    for name, scores in rows:
        cells = [recall(scores[part], gold[part]) for part in (even, odd, np.arange(len(gold)))]
        print(f"| {name} | " + " | ".join(" / ".join(f"{v:.2f}" for v in c) for c in cells) + " |")


if __name__ == "__main__":
    main()
