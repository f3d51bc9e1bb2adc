"""Training throughput: real (non-padding) tokens per second of two loaders, same model.

- ours: windows of similar length batched together, each batch padded to its own longest
  window (``qa_finetune.training.tf_data.make_dataset``);
- padded: the original recipe's loader, shuffled windows all padded to max_length.

Both feed the same compiled model and batch size; runs alternate so machine noise hits both.

    .venv/bin/python bench/train_throughput.py --data ../shared/data/squadshifts-new-wiki.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import tf_keras

from bench._machine import machine_line


class BatchTimer(tf_keras.callbacks.Callback):
    """Records the wall time of each training batch."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []
        self._start = 0.0

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.times.append(time.perf_counter() - self._start)


def real_tokens(dataset: Any, skip: int, steps: int) -> int:
    """Non-padding tokens in batches ``skip .. skip+steps`` of a deterministic dataset."""
    total = 0
    for batch in dataset.skip(skip).take(steps):
        total += int(np.asarray(batch["attention_mask"]).sum())
    return total


def measure(model: Any, dataset: Any, warmup: int, steps: int) -> tuple[float, float]:
    """(seconds for ``steps`` batches after ``warmup``, real tokens in those batches)."""
    timer = BatchTimer()
    model.fit(dataset.take(warmup + steps), epochs=1, verbose=0, callbacks=[timer])
    seconds = sum(timer.times[warmup:])
    return seconds, real_tokens(dataset, warmup, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data/squadshifts-new-wiki.json")
    parser.add_argument("--max-length", type=int, default=384)
    parser.add_argument("--stride", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output-dir", default=".bench")
    args = parser.parse_args()

    from qa_finetune.config import Config
    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.reference import load_tokenizer
    from qa_finetune.training.prepare import prepare
    from qa_finetune.training.tf_data import make_dataset

    config = Config.from_dict(
        {
            "data": {"train_file": args.data, "validation_fraction": 0.0},
            "preprocess": {"max_length": args.max_length, "stride": args.stride},
            "train": {"output_dir": args.output_dir},
        }
    )
    prepared = prepare(config)
    tokenizer = load_tokenizer(prepared.model_dir)
    model = load_qa_model(prepared.model_dir)
    model.compile(optimizer=tf_keras.optimizers.Adam(3e-5))

    loaders = {
        "ours (bucketed, padded per batch)": lambda seed: make_dataset(
            prepared.train, tokenizer, args.batch_size, seed=seed, bucketing=True
        ),
        "padded to max_length (original)": lambda seed: make_dataset(
            prepared.train,
            tokenizer,
            args.batch_size,
            seed=seed,
            bucketing=False,
            fixed_length=args.max_length,
        ),
    }
    rates: dict[str, list[float]] = {name: [] for name in loaders}
    for repeat in range(args.repeats):
        for name, build in loaders.items():
            seconds, tokens = measure(model, build(repeat), args.warmup, args.steps)
            rates[name].append(tokens / seconds)
            print(f"repeat {repeat}: {name}: {tokens / seconds:,.0f} real tokens/s", flush=True)

    base = statistics.median(rates["padded to max_length (original)"])
    print()
    print(machine_line())
    print(
        f"model {config.model.name_or_path}, {len(prepared.train):,} windows, max_length "
        f"{args.max_length}, stride {args.stride}, batch {args.batch_size}, {args.steps} timed "
        f"steps after {args.warmup} warm-up, median of {args.repeats}"
    )
    print()
    print("| loader | real tokens/s (median) | ratio |")
    print("|---|---:|---:|")
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"| {name} | {median:,.0f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
