"""The sentence encoder's forward pass, TensorFlow against ONNX Runtime: passages embedded
per second (batches of 32 real SQuAD paragraphs) and one question's latency.

    python bench/studies/encoder_backends.py \
        --data ../shared/data/squad-v1.1-dev.json --passages 256

The ONNX graph is the same TF function converted with tf2onnx (opset 17) into a temporary
folder; both give the last hidden states and pool them the same way, so the vectors are
compared too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from qa_finetune.modeling.sentence_encoder import SentenceEncoder
from qa_finetune.retrieval.embedding import pool

QUESTIONS = ["Who designed the Ostra bridge?", "Which vehicle would not start in the cold?"]


def contexts(path: Path, count: int) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    found = [p["context"] for article in data for p in article["paragraphs"]]
    return found[:count]


def onnx_session(encoder: SentenceEncoder, folder: Path):
    import onnxruntime as ort
    import tensorflow as tf
    import tf2onnx

    model = encoder.model
    spec = [tf.TensorSpec([None, None], tf.int32, name=n) for n in ("ids", "mask", "types")]

    @tf.function(input_signature=spec)
    def forward(ids, mask, types):
        return model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    target = folder / "encoder.onnx"
    from qa_finetune.modeling.formats.onnx import _erfc_handler

    tf2onnx.convert.from_function(
        forward,
        input_signature=spec,
        opset=17,
        output_path=str(target),
        custom_op_handlers={"Erfc": (_erfc_handler, [])},
    )
    options = ort.SessionOptions()
    return ort.InferenceSession(str(target), options, providers=["CPUExecutionProvider"])


def timed(run, texts: list[str], batch: int) -> tuple[float, np.ndarray]:
    began = time.perf_counter()
    out = np.concatenate([run(texts[i : i + batch]) for i in range(0, len(texts), batch)])
    return len(texts) / (time.perf_counter() - began), out


def latency(run, repeats: int = 30) -> float:
    times = []
    for i in range(repeats):
        began = time.perf_counter()
        run([QUESTIONS[i % 2]])
        times.append(1000 * (time.perf_counter() - began))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--passages", type=int, default=256)
    args = parser.parse_args()
    encoder = SentenceEncoder.load()
    texts = contexts(args.data, args.passages)
    with tempfile.TemporaryDirectory() as work:
        session = onnx_session(encoder, Path(work))

        def run_onnx(batch: list[str]) -> np.ndarray:
            enc = encoder.tokenizer(
                batch, truncation=True, max_length=256, padding=True, return_tensors="np"
            )
            feed = {
                "ids": enc["input_ids"].astype(np.int32),
                "mask": enc["attention_mask"].astype(np.int32),
                "types": enc["token_type_ids"].astype(np.int32),
            }
            (hidden,) = session.run(None, feed)
            return pool(hidden, feed["mask"], "mean")

        run_tf = encoder._batch
        run_tf(texts[:32])  # traced once, as an index run would
        run_onnx(texts[:32])
        print(machine_line())
        for name, run in (("tensorflow", run_tf), ("onnxruntime", run_onnx)):
            rate, vectors = timed(run, texts, 32)
            print(f"{name}: {rate:.1f} passages/s, one question p50 {latency(run):.1f} ms")
            if name == "tensorflow":
                reference = vectors
            else:
                cosine = np.sum(reference * vectors, axis=1)
                print(f"  cosine with the TF vectors: min {cosine.min():.6f}")


if __name__ == "__main__":
    main()
