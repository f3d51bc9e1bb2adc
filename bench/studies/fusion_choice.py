"""How to fuse BM25 and dense search, measured on held-out questions (never a test set):
recall@1/5/20 of the gold paragraph for BM25, dense, BM25 + w x cosine for several w, and
reciprocal-rank fusion; then, with ``--read``, open F1 of the chosen fusion by passages read
and retrieval weight in the choice across passages, and the two-step lead.

    python bench/studies/fusion_choice.py --model ../shared/models/minilm-31k \\
        --data outputs/general-heldout.jsonl --questions 600 --read 5

Each question is searched among all the file's contexts (as `evaluate --open` does).
``bench/heldout_split.py`` writes the held-out file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from qa_finetune.evaluation import evaluate as plain
from qa_finetune.evaluation.open_evaluation import collection_of, spread_sample
from qa_finetune.modeling.embedding_cache import encode_cached
from qa_finetune.modeling.sentence_encoder import SentenceEncoder
from qa_finetune.retrieval.bm25 import positive_top
from qa_finetune.retrieval.fusion import best, reciprocal_rank_fusion

WEIGHTS = (5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 60.0)
AT = (1, 5, 20)


def recall_at(rankings: list[list[int]], gold: list[int], k: int) -> float:
    """The share (in %) of questions whose gold passage is among the first ``k`` of its ranking."""
    return 100.0 * sum(g in r[:k] for r, g in zip(rankings, gold, strict=True)) / max(len(gold), 1)


def recall(rankings: list[list[int]], gold: list[int]) -> list[float]:
    return [recall_at(rankings, gold, k) for k in AT]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--data", required=True)
    parser.add_argument("--questions", type=int, default=600)
    parser.add_argument("--read", type=int, default=0, help="passages read per question (0: none)")
    parser.add_argument(
        "--encoder", default=None, help="sentence encoder folder or id (default: the embedded one)"
    )
    parser.add_argument(
        "--halves",
        action="store_true",
        help="also recall on the even- and odd-numbered questions: choose on one, report the other",
    )
    args = parser.parse_args()
    everything = plain.load_examples(args.data, None)
    questions = spread_sample(everything.records, args.questions)
    index, numbers = collection_of(everything.records)
    encoder = SentenceEncoder.load(args.encoder) if args.encoder else SentenceEncoder.load()
    began = time.perf_counter()
    passages = encode_cached(encoder, index.texts)
    embedded = time.perf_counter() - began
    asked = encoder.encode([q["question"] for q in questions])
    gold = [numbers[q["context"]] for q in questions]
    print(machine_line())
    print(
        f"{args.data}: {len(questions)} questions, {len(index)} passages "
        f"(embedded or read from the cache in {embedded:.0f} s)"
    )
    bm25_all = [index.scores.scores(index.tokenizer.terms([q["question"]])[0]) for q in questions]
    cosines = asked @ passages.T
    rows = {"bm25": [[n for n, _ in positive_top(s, 20)] for s in bm25_all]}
    rows["dense"] = [list(np.argsort(-c, kind="stable")[:20]) for c in cosines]
    for w in WEIGHTS:
        rows[f"bm25 + {w:g} x cosine"] = [
            [n for n, _ in best(dict(enumerate((b + w * c).tolist())), 20)]
            for b, c in zip(bm25_all, cosines, strict=True)
        ]
    # BM25 divided by the question's best BM25 score (scale-free), plus w x cosine.
    for w in (0.25, 0.5, 1.0, 2.0):
        rows[f"bm25 / its max + {w:g} x cosine"] = [
            [n for n, _ in best(dict(enumerate((b / max(b.max(), 1e-9) + w * c).tolist())), 20)]
            for b, c in zip(bm25_all, cosines, strict=True)
        ]
    rows["reciprocal rank (k=60)"] = [
        [n for n, _ in reciprocal_rank_fusion([bm, de], 20)]
        for bm, de in zip(rows["bm25"], rows["dense"], strict=True)
    ]
    halves = ("even @1 / @5 / @20", "odd @1 / @5 / @20") if args.halves else ()
    print("| retrieval | recall@1 | recall@5 | recall@20 |" + "".join(f" {h} |" for h in halves))
    print("|---|---|---|---|" + "---|" * len(halves))
    figures = {}
    for name, ranking in rows.items():
        ranked = [[int(n) for n in r] for r in ranking]
        figures[name] = recall(ranked, gold)
        line = f"| {name} | " + " | ".join(f"{v:.2f}" for v in figures[name]) + " |"
        for parity in range(len(halves)):
            part = recall(ranked[parity::2], gold[parity::2])
            line += " " + " / ".join(f"{v:.2f}" for v in part) + " |"
        print(line)
    Path("outputs").mkdir(exist_ok=True)
    Path("outputs/fusion_choice.json").write_text(json.dumps(figures, indent=1), "utf-8")
    if args.read:
        from bench.studies.fusion_reading import print_reading

        print_reading(args, questions, index, passages, encoder)


if __name__ == "__main__":
    main()
