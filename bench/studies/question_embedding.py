"""What one question's embedding costs, by path: TensorFlow's traced forward pass (as a batch
of one; questions are padded to their own length, never to 256) against the NumPy forward
pass on one BLAS thread that ``SentenceEncoder.encode`` uses for a lone text. The two paths
run alternately, question by question, in one process; their vectors are compared.

    python bench/studies/question_embedding.py --data ../shared/data --questions 100
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from bench.retrieval_scale import percentiles, questions_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=100)
    args = parser.parse_args()
    from qa_finetune.modeling.sentence_encoder import SentenceEncoder

    encoder = SentenceEncoder.load()
    questions = [q for q, _ in questions_of(args.data, args.questions)]
    lengths = [len(encoder.tokenizer(q)["input_ids"]) for q in questions]
    encoder._batch(questions[:2])  # traced once, as any run does
    encoder.encode([questions[0]])  # the NumPy weights read once
    timings: dict[str, list[float]] = {"tensorflow": [], "numpy, one BLAS thread": []}
    worst = 1.0
    for question in questions:
        began = time.perf_counter()
        by_tf = encoder._batch([question])
        timings["tensorflow"].append(1000 * (time.perf_counter() - began))
        began = time.perf_counter()
        by_numpy = encoder.encode([question])
        timings["numpy, one BLAS thread"].append(1000 * (time.perf_counter() - began))
        worst = min(worst, float(by_tf[0] @ by_numpy[0]))
    print(machine_line())
    print(f"{len(questions)} questions, {np.median(lengths):.0f} tokens at the median")
    for name, times in timings.items():
        print(f"{name}: ms {percentiles(times)}")
    print(f"lowest cosine between the two paths' vectors: {worst:.7f}")


if __name__ == "__main__":
    main()
