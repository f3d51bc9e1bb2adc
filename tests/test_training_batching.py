"""Length-bucketed batch order."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from qa_finetune.training.batching import bucketed_order, padded_tokens


@given(
    lengths=st.lists(st.integers(1, 384), min_size=1, max_size=500),
    batch_size=st.integers(1, 40),
    seed=st.integers(0, 10),
    bucketing=st.booleans(),
)
def test_order_is_a_seeded_permutation(
    lengths: list[int], batch_size: int, seed: int, bucketing: bool
) -> None:
    array = np.array(lengths)
    order = bucketed_order(array, batch_size, seed, bucketing)
    assert sorted(order.tolist()) == list(range(len(lengths)))
    assert np.array_equal(order, bucketed_order(array, batch_size, seed, bucketing))
    # Only the final batch may be short.
    sizes = [len(order[i : i + batch_size]) for i in range(0, len(order), batch_size)]
    assert all(size == batch_size for size in sizes[:-1])


def test_bucketing_pads_far_less_than_random_batches() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(40, 384, size=5000)
    random_order = bucketed_order(lengths, 32, seed=1, bucketing=False)
    bucketed = bucketed_order(lengths, 32, seed=1, bucketing=True)
    real = int(lengths.sum())
    assert padded_tokens(lengths, bucketed, 32) < 1.05 * real
    assert padded_tokens(lengths, random_order, 32) > 1.3 * real


def test_different_epochs_see_different_orders() -> None:
    lengths = np.arange(1000) % 300 + 1
    assert not np.array_equal(bucketed_order(lengths, 16, 1), bucketed_order(lengths, 16, 2))
