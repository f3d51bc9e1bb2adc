"""Real sentence embeddings for ``bench/studies/vector_search.py --vectors pairs|noise``: the
sentences of SQuAD v1.1 dev and the SQuADShifts files (20-300 characters, deduplicated,
shuffled with a fixed seed), embedded by the default encoder for at most ``--seconds``, and
300 SQuAD v1.1 dev questions spread over the file. Sentences embed several times faster
than paragraphs, which is why sentences stand in for passages here.

    python bench/studies/sentence_vectors.py --data ../shared/data --seconds 540
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line

FILES = (
    "squad-v1.1-dev.json",
    "squadshifts-new-wiki.json",
    "squadshifts-amazon.json",
    "squadshifts-reddit.json",
)


def texts(data: Path) -> tuple[list[str], list[str]]:
    """(sentences, SQuAD v1.1 dev questions)."""
    sentences, questions = [], []
    for name in FILES:
        for article in json.loads((data / name).read_text(encoding="utf-8"))["data"]:
            for paragraph in article["paragraphs"]:
                for sentence in re.split(r"(?<=[.!?])\s+", paragraph["context"]):
                    if 20 <= len(sentence) <= 300:
                        sentences.append(sentence)
                if name == FILES[0]:
                    questions.extend(qa["question"] for qa in paragraph["qas"])
    sentences = list(dict.fromkeys(sentences))
    np.random.default_rng(0).shuffle(sentences)
    picks = np.linspace(0, len(questions) - 1, 300).astype(int)
    return sentences, [questions[i] for i in picks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=540)
    parser.add_argument("--out", type=Path, default=Path("/tmp/qa-finetune-sentence-vectors"))
    args = parser.parse_args()
    from qa_finetune.modeling.sentence_encoder import SentenceEncoder

    encoder = SentenceEncoder.load()
    sentences, questions = texts(args.data)
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "questions.npy", encoder.encode(questions))
    print(machine_line())
    print(f"{len(sentences)} sentences to embed, for {args.seconds:.0f} s at most")
    began, done = time.perf_counter(), []
    for first in range(0, len(sentences), 512):
        done.append(encoder.encode(sentences[first : first + 512], batch_size=64))
        np.save(args.out / "sentences.npy", np.concatenate(done))  # kept if stopped
        if time.perf_counter() - began > args.seconds:
            break
    count = sum(len(d) for d in done)
    rate = count / (time.perf_counter() - began)
    print(f"{count} sentences embedded, {rate:.1f} a second, into {args.out}")


if __name__ == "__main__":
    main()
