"""The reader as a reranker: recall@1/5 of the gold paragraph when the hybrid search's best N
passages are reordered by the reader's own relevance score, measured on held-out questions
(never a test set).

The reader is a cross-encoder already: it reads question and passage together, and it was
trained (on the same 31k questions) to put its null score above every span in a window
without the answer. So the score passages compete on across passages, ``margin + w x fused``
(``PassageReading.rank_score``), is a relevance score. This study asks how much of the gap
between recall@5 and recall@N it closes, and for which weight ``w``, by halves (choose on
one, report the other), and what each passage read costs.

    python bench/studies/reader_rerank.py --model ../shared/models/minilm-31k \\
        --data outputs/general-heldout.jsonl --questions 600 --depth 20
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from bench.studies.fusion_choice import recall_at
from qa_finetune.decoding.across_passages import PassageReading
from qa_finetune.evaluation import evaluate as plain
from qa_finetune.evaluation.open_evaluation import collection_of, spread_sample
from qa_finetune.evaluation.passage_readings import passage_readings
from qa_finetune.modeling.embedding_cache import encode_cached
from qa_finetune.modeling.for_answering import load_for_answering
from qa_finetune.modeling.sentence_encoder import SentenceEncoder
from qa_finetune.retrieval.retriever import Hit

WEIGHTS = (0.0, 1.0, 2.0, 4.0, 8.0)
AT = (1, 5)


def reranked(readings: Sequence[PassageReading], hits: Sequence[Hit], weight: float) -> list[int]:
    """The passage numbers of ``hits`` reordered by the reader's score (best first); a passage
    the reader gave no span keeps its place after the ones it scored."""
    best: dict[int, float] = {}
    for reading in readings:
        score = reading.rank_score(weight)
        best[reading.passage] = max(best.get(reading.passage, float("-inf")), score)
    order = sorted(range(len(hits)), key=lambda p: (-best.get(p, float("-inf")), p))
    return [hits[p].passage.number for p in order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--questions", type=int, default=600)
    parser.add_argument("--depth", type=int, default=20, help="passages found, then reranked")
    args = parser.parse_args()
    everything = plain.load_examples(args.data, None)
    questions = spread_sample(everything.records, args.questions)
    index, numbers = collection_of(everything.records)
    encoder = SentenceEncoder.load()
    index.add_vectors(encode_cached(encoder, index.texts), encoder)
    gold = [numbers[q["context"]] for q in questions]
    found = [index.search(q["question"], args.depth) for q in questions]
    loaded = load_for_answering(args.model, tune_batch=True)
    began = time.perf_counter()
    readings = passage_readings(loaded, questions, found, 0)
    seconds = time.perf_counter() - began
    print(machine_line())
    pairs = sum(len(hits) for hits in found)
    print(
        f"{args.data}: {len(questions)} questions, {len(index)} passages, {args.depth} found "
        f"each; {pairs} passages read in {seconds:.0f} s ({1000 * seconds / pairs:.1f} ms each)"
    )
    rows = {"hybrid (no rerank)": [[h.passage.number for h in hits] for hits in found]}
    for weight in WEIGHTS:
        rows[f"reader: margin + {weight:g} x fused"] = [
            reranked(readings[q["id"]], hits, weight)
            for q, hits in zip(questions, found, strict=True)
        ]
    print(f"\n| ranking of the best {args.depth} | recall@1 | recall@5 | even @5 | odd @5 |")
    print("|---|---|---|---|---|")
    for name, ranking in rows.items():
        cells = [recall_at(ranking, gold, k) for k in AT]
        cells += [recall_at(ranking[p::2], gold[p::2], 5) for p in (0, 1)]
        print(f"| {name} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    ceiling = recall_at(rows["hybrid (no rerank)"], gold, args.depth)
    print(f"\nrecall@{args.depth} (the ceiling): {ceiling:.2f}")


if __name__ == "__main__":
    main()
