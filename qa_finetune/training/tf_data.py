"""Cached Arrow features -> ``tf.data`` batches padded to their own longest window."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from qa_finetune.training.batching import bucketed_order
from qa_finetune.training.sharding import per_worker_batch, shard_order

LABEL_COLUMNS = ["start_positions", "end_positions"]


def input_columns(features: Any) -> list[str]:
    """Model input columns present in the features."""
    wanted = ("input_ids", "attention_mask", "token_type_ids")
    return [c for c in wanted if c in features.column_names]


def window_lengths(features: Any) -> np.ndarray:
    """Token count of every window (no padding is stored in the cache)."""
    import pyarrow.compute as pc

    # Arrow knows list lengths from its offsets: no token ids are converted to Python.
    column = features.with_format("arrow")[:]["input_ids"]
    return pc.list_value_length(column).to_numpy(zero_copy_only=False).astype(np.int64)


def pad_multiple(jit_compile: bool) -> int:
    """XLA recompiles for every new shape, so it gets coarse buckets; otherwise multiples of 8."""
    return 64 if jit_compile else 8


def make_dataset(
    features: Any,
    tokenizer: Any,
    batch_size: int,
    *,
    seed: int | None,
    bucketing: bool = True,
    labels: bool = True,
    pad_to_multiple_of: int = 8,
    fixed_length: int | None = None,
    shard: tuple[int, int] | None = None,
    order: np.ndarray | None = None,
    extra_columns: tuple[str, ...] = (),
) -> tf.data.Dataset:
    """A ``to_tf_dataset`` pipeline; ``seed=None`` keeps the stored order (evaluation).

    ``fixed_length`` pads every window to that length instead: the original recipe's loader,
    kept for benchmarks. ``shard=(workers, index)`` keeps that worker's slice of every global
    batch of ``batch_size`` (see ``training.sharding``), batched per worker, with tf.data's
    auto-sharding off since the data is already sharded. ``order``: the epoch's order as
    indices into ``features`` (``training.epoch_windows``), in place of the seeded one.
    ``extra_columns``: feature columns batched beside the inputs and labels (a training
    method's, such as the window index its teacher logits are looked up by).
    """
    import copy

    from transformers import DataCollatorWithPadding

    # Labels are positions in the unpadded window: padding goes after it, whatever side the
    # tokenizer pads on (XLNet pads on the left), as in prediction.
    tokenizer = copy.copy(tokenizer)
    tokenizer.padding_side = "right"
    if order is None and seed is not None:
        order = bucketed_order(window_lengths(features), batch_size, seed, bucketing)
    if order is not None:
        if shard is not None:
            order = shard_order(order, batch_size, *shard)
        features = features.select(order)
    if shard is not None:
        batch_size = per_worker_batch(batch_size, shard[0])
    collator = DataCollatorWithPadding(
        tokenizer,
        padding="max_length" if fixed_length else "longest",
        max_length=fixed_length,
        pad_to_multiple_of=None if fixed_length else pad_to_multiple_of,
        return_tensors="np",
    )
    columns = input_columns(features) + (LABEL_COLUMNS if labels else []) + list(extra_columns)
    dataset = features.to_tf_dataset(
        batch_size=batch_size,
        columns=columns,
        shuffle=False,  # the order above is already seeded and bucketed
        collate_fn=collator,
        drop_remainder=False,
    )
    if shard is not None:
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        dataset = dataset.with_options(options)
    return dataset
