"""The original recipe's settings on one NVIDIA GPU: real tokens/s with and without XLA, and
peak GPU memory, for a fixed number of training steps.

max_length 400, stride 100, global batch 32, mixed precision (float16 compute, float32
master weights and logits), the packaged encoder, the shared training data. Run through
``bench/studies/gpu_recipe.sh``, which also trains briefly and scores the result.

    .venv/bin/python bench/studies/gpu_recipe.py --data ../shared/data/squadshifts-new-wiki.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line


def gpu_or_exit() -> str:
    """The GPU's name, or a clear message and exit status 2 on a machine without one."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        print(
            "error: TensorFlow sees no GPU here; run this on a machine with an NVIDIA GPU "
            "(where nvidia-smi lists one, install the CUDA build: "
            "pip install 'tensorflow[and-cuda]')"
        )
        raise SystemExit(2)
    details = tf.config.experimental.get_device_details(gpus[0])
    return str(details.get("device_name", gpus[0].name))


def measure(prepared: Any, tokenizer: Any, args: argparse.Namespace, xla: bool) -> dict[str, Any]:
    """Real (non-padding) tokens/s over ``args.steps`` steps after ``args.warmup``."""
    import numpy as np
    import tensorflow as tf
    import tf_keras

    from qa_finetune.modeling.loading import configure_precision, load_qa_model
    from qa_finetune.training.tf_data import make_dataset, pad_multiple

    tf_keras.backend.clear_session()
    configure_precision("on")
    tf.config.experimental.reset_memory_stats("GPU:0")
    model = load_qa_model(prepared.model_dir)
    optimizer = tf_keras.mixed_precision.LossScaleOptimizer(tf_keras.optimizers.Adam(3e-5))
    model.compile(optimizer=optimizer, jit_compile=xla)
    dataset = make_dataset(
        prepared.train, tokenizer, args.batch_size, seed=0, pad_to_multiple_of=pad_multiple(xla)
    ).take(args.warmup + args.steps)
    batches = list(dataset)
    for batch in batches[: args.warmup]:
        model.train_on_batch(batch)
    started = time.perf_counter()
    for batch in batches[args.warmup :]:
        loss = model.train_on_batch(batch)
    seconds = time.perf_counter() - started
    tokens = sum(int(np.asarray(b["attention_mask"]).sum()) for b in batches[args.warmup :])
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]
    return {
        "xla": xla,
        "steps": len(batches) - args.warmup,
        "real_tokens_per_second": round(tokens / seconds),
        "peak_gpu_memory_gib": round(peak / 2**30, 2),
        "last_loss": float(np.asarray(loss).mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data/squadshifts-new-wiki.json")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output-dir", default=".bench/gpu")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    device = gpu_or_exit()
    from qa_finetune.config import Config
    from qa_finetune.modeling.reference import load_tokenizer
    from qa_finetune.training.prepare import prepare

    config = Config.from_dict(
        {
            "data": {"train_file": args.data, "validation_fraction": 0.0},
            "preprocess": {"max_length": 400, "stride": 100},
            "train": {"output_dir": args.output_dir, "batch_size": args.batch_size},
        }
    )
    prepared = prepare(config)
    tokenizer = load_tokenizer(prepared.model_dir)
    rows = [measure(prepared, tokenizer, args, xla) for xla in (False, True)]
    print(machine_line())
    print(f"GPU: {device}; max_length 400, stride 100, batch {args.batch_size}, mixed_float16")
    print("| XLA | steps | real tokens/s | peak GPU memory (GiB) |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print(
            f"| {'on' if row['xla'] else 'off'} | {row['steps']} | "
            f"{row['real_tokens_per_second']:,} | {row['peak_gpu_memory_gib']} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
