"""Seeded, length-bucketed batch order (pure NumPy).

Windows of similar length go into the same batch, so dynamic padding adds few tokens; the
order of the batches is shuffled so training still sees a random mix of lengths.
"""

from __future__ import annotations

import numpy as np

# A bucket holds this many batches' worth of windows: larger buckets pad less but shuffle less.
BUCKET_BATCHES = 50


def bucketed_order(
    lengths: np.ndarray, batch_size: int, seed: int, bucketing: bool = True
) -> np.ndarray:
    """A permutation of ``range(len(lengths))`` read in consecutive ``batch_size`` batches."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths))
    if not bucketing or len(lengths) <= batch_size:
        return order
    bucket = batch_size * BUCKET_BATCHES
    batches = []
    for begin in range(0, len(order), bucket):
        chunk = order[begin : begin + bucket]
        # Stable sort keeps the random order among windows of equal length.
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    # Full batches are shuffled; a short final batch stays last so every batch but one is full.
    full = [b for b in batches if len(b) == batch_size]
    partial = [b for b in batches if len(b) < batch_size]
    shuffled = [full[i] for i in rng.permutation(len(full))]
    return np.concatenate(shuffled + partial) if shuffled or partial else order


def padded_tokens(lengths: np.ndarray, order: np.ndarray, batch_size: int) -> int:
    """Tokens a loader that pads each batch to its longest window would feed the model."""
    total = 0
    for begin in range(0, len(order), batch_size):
        batch = lengths[order[begin : begin + batch_size]]
        total += int(batch.max()) * len(batch)
    return total
