"""Ragged rows (token ids, offsets) and their padded array form: the one place that does it.

Windows are built, cached and predicted without padding; the model and the span search want
rectangles. Rows are concatenated into one flat array plus their lengths, and padding is a
single masked assignment, never a Python loop per row.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Ragged:
    """Rows of items (ints, or pairs of ints) stored flat: ``values[starts[i]:][:lengths[i]]``."""

    values: np.ndarray  # [all items] or [all items, 2]
    lengths: np.ndarray  # [rows] int64
    starts: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.starts = np.zeros(len(self.lengths), dtype=np.int64)
        np.cumsum(self.lengths[:-1], out=self.starts[1:])

    def __len__(self) -> int:
        return len(self.lengths)

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]], dtype: Any = np.int64) -> Ragged:
        """Rows of ints."""
        lengths = _lengths(rows)
        values = np.fromiter(
            itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum())
        )
        return cls(values.astype(dtype, copy=False), lengths)

    @classmethod
    def from_pairs(
        cls, rows: Sequence[Sequence[Sequence[int] | None]], missing: tuple[int, int] = (-1, -1)
    ) -> Ragged:
        """Rows of (start, end) pairs; a None pair (a token outside the context) is ``missing``."""
        lengths = _lengths(rows)
        flat = np.fromiter(
            itertools.chain.from_iterable(
                missing if pair is None else pair for row in rows for pair in row
            ),
            dtype=np.int64,
            count=2 * int(lengths.sum()),
        )
        return cls(flat.reshape(-1, 2), lengths)

    @classmethod
    def from_arrow(cls, column: Any, dtype: Any = np.int64) -> Ragged:
        """A list<int> or list<list<int>> Arrow column (null pairs become -1, -1), no Python ints
        made on the way."""
        import pyarrow as pa
        import pyarrow.compute as pc

        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        lengths = pc.list_value_length(array).to_numpy(zero_copy_only=False).astype(np.int64)
        items = array.flatten()
        if pa.types.is_list(items.type) or pa.types.is_large_list(items.type):
            items = pc.fill_null(items, pa.scalar([-1, -1], type=items.type)).flatten()
            values = items.to_numpy(zero_copy_only=False).astype(dtype).reshape(-1, 2)
        else:
            values = items.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
        return cls(values, lengths)

    def padded(
        self,
        rows: Sequence[int] | np.ndarray | None = None,
        width: int | None = None,
        fill: int = 0,
    ) -> np.ndarray:
        """``[rows, width(, 2)]`` with ``fill`` past each row's end; all rows by default, as wide
        as the longest of them unless ``width`` is given (a longer row is a ValueError)."""
        chosen = None if rows is None else np.asarray(rows, dtype=np.int64)
        lengths = self.lengths if chosen is None else self.lengths[chosen]
        if width is None:
            width = int(lengths.max(initial=0))
        too_long = np.flatnonzero(lengths > width)
        if len(too_long):
            row = int(too_long[0])
            raise ValueError(f"row {row} has {lengths[row]} items, more than width={width}")
        out = np.full((len(lengths), width, *self.values.shape[1:]), fill, dtype=self.values.dtype)
        mask = np.arange(width) < lengths[:, None]
        if chosen is None:
            out[mask] = self.values  # rows in stored order: the flat values fill the mask as-is
        else:
            index = self.starts[chosen][:, None] + np.arange(width)
            out[mask] = self.values[index[mask]]
        return out


def _lengths(rows: Sequence[Sequence[Any]]) -> np.ndarray:
    return np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
