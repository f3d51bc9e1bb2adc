"""Ragged arrays: padded from lists, pairs and Arrow columns alike."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from qa_finetune.features.arrays import Ragged

ROWS = [[5, 6, 7], [], [8], [9, 10]]
PAIRS = [[(0, 0), None, (3, 5)], [], [None], [(1, 2), (2, 4)]]


def manual(rows: list, width: int, fill: int, item: tuple = ()) -> np.ndarray:
    out = np.full((len(rows), width, *item), fill, dtype=np.int64)
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            out[r, c] = (-1, -1) if value is None else value
    return out


def test_padded_lists_all_rows_a_subset_and_a_fixed_width() -> None:
    ragged = Ragged.from_lists(ROWS)
    np.testing.assert_array_equal(ragged.padded(fill=-7), manual(ROWS, 3, -7))
    subset = [3, 0]
    np.testing.assert_array_equal(
        ragged.padded(subset, width=4, fill=0), manual([ROWS[i] for i in subset], 4, 0)
    )
    with pytest.raises(ValueError, match="more than width=2"):
        ragged.padded(width=2)
    assert Ragged.from_lists([]).padded().shape == (0, 0)


def test_pairs_and_arrow_columns_give_the_same_arrays() -> None:
    expected = manual(PAIRS, 5, -1, (2,))
    np.testing.assert_array_equal(Ragged.from_pairs(PAIRS).padded(width=5, fill=-1), expected)
    pairs_column = pa.array([[None if p is None else list(p) for p in row] for row in PAIRS])
    from_arrow = Ragged.from_arrow(pa.chunked_array([pairs_column]))
    np.testing.assert_array_equal(from_arrow.padded(width=5, fill=-1), expected)
    ints = Ragged.from_arrow(pa.array(ROWS), dtype=np.int32)
    assert ints.values.dtype == np.int32
    np.testing.assert_array_equal(ints.padded([1, 2], fill=0), manual([[], [8]], 1, 0))
