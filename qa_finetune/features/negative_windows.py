"""The training windows one epoch uses (``preprocess.negative_windows``): every window that
holds its question's answer, and N of the windows without it per question, sampled anew each
epoch.

A long document becomes many windows, and almost all of them are labelled (CLS, CLS): with
``"all"`` (the default) an epoch trains on every one; with N it keeps each question's answer
windows and at most N others. A question with no answer window at all (SQuAD v2 unanswerable,
or an answer that no window holds whole) keeps N of its windows, so it still teaches "no
answer"; N = 0 keeps answer windows alone, and so drops such questions from training.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qa_finetune.errors import QAFinetuneError

ALL = "all"
# The sample draws from a random stream of its own, so it does not repeat the batch order's
# draws, which are seeded with the same ``seed + epoch``.
_STREAM = 1


def holds_answer(
    start_positions: np.ndarray, end_positions: np.ndarray, cls_index: np.ndarray | int
) -> np.ndarray:
    """Whether each window holds its answer: a window without it is labelled (CLS, CLS), and an
    answer's tokens are context tokens, never the CLS token."""
    start, end = np.asarray(start_positions), np.asarray(end_positions)
    return ~((start == cls_index) & (end == cls_index))


def cls_positions(input_ids: Any, cls_token_id: int) -> np.ndarray:
    """Position of the first ``cls_token_id`` in each window of an Arrow list column (training
    features keep no ``cls_index``; XLNet puts CLS last), or -1 where a window has none."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = input_ids.combine_chunks() if isinstance(input_ids, pa.ChunkedArray) else input_ids
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False).astype(np.int64)
    tokens = pc.list_flatten(column).to_numpy(zero_copy_only=False)
    window = np.repeat(np.arange(len(lengths)), lengths)
    found = np.flatnonzero(tokens == cls_token_id)
    # np.unique keeps the first occurrence: the first CLS of each window.
    windows, first = np.unique(window[found], return_index=True)
    positions = np.full(len(lengths), -1, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    positions[windows] = found[first] - starts[windows]
    return positions


def question_codes(example_ids: Any) -> np.ndarray:
    """One integer per window naming its question: integers as given, strings (a list, a NumPy
    or an Arrow array) through Arrow's hash encoding, much faster than sorting them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(example_ids, np.ndarray) and np.issubdtype(example_ids.dtype, np.integer):
        return example_ids.astype(np.int64, copy=False)
    if isinstance(example_ids, np.ndarray):
        example_ids = example_ids.tolist()  # Arrow converts Python strings faster than NumPy's
    array = (
        example_ids
        if isinstance(example_ids, pa.Array | pa.ChunkedArray)
        else pa.array(example_ids)
    )
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_integer(array.type):
        return array.to_numpy(zero_copy_only=False).astype(np.int64)
    return pc.dictionary_encode(array).indices.to_numpy(zero_copy_only=False).astype(np.int64)


def check_negative_windows(value: Any) -> int | None:
    """``"all"`` -> None (every window), an integer >= 0 -> itself; anything else is an error."""
    if value == ALL:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise QAFinetuneError(
            f"negative_windows must be 'all' or a whole number >= 0, got {value!r}"
        )
    return int(value)


def select_windows(
    example_ids: Any, has_answer: np.ndarray, negatives: int | str, seed: int, epoch: int
) -> np.ndarray:
    """Sorted indices of the windows epoch ``epoch`` trains on: all that hold the answer, and
    ``negatives`` of the others per question (all of them where it has fewer), drawn from
    ``seed + epoch``. ``example_ids`` names each window's question (see ``question_codes``)."""
    count = check_negative_windows(negatives)
    has_answer = np.asarray(has_answer, dtype=bool)
    if count is None:
        return np.arange(len(has_answer), dtype=np.int64)
    codes = question_codes(example_ids)
    if len(codes) != len(has_answer):
        raise ValueError("example_ids and has_answer must have one value per window")
    # Each question's other windows in a random order (a shuffle, then a stable sort by
    # question: far faster than sorting on two keys); the first ``count`` of each are kept.
    shuffled = np.random.default_rng([seed + epoch, _STREAM]).permutation(
        np.flatnonzero(~has_answer)
    )
    order = shuffled[np.argsort(codes[shuffled], kind="stable")]
    grouped = codes[order]
    first_of_group = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    group_sizes = np.diff(np.r_[first_of_group, len(order)])
    rank = np.arange(len(order)) - np.repeat(first_of_group, group_sizes)
    kept = np.concatenate([np.flatnonzero(has_answer), order[rank < count]])
    return np.sort(kept).astype(np.int64)
