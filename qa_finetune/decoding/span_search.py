"""The vectorised n-best span search behind ``decoding/spans``.

For every window: the ``n_best`` highest-scoring context positions as starts times the
``n_best`` highest as ends, in blocks of windows; pairs that cannot make their example's
n-best are pruned early. Candidates are then deduplicated by character span, ranked per
example and given softmax probabilities. Pure NumPy.
"""

from __future__ import annotations

import numpy as np

# Windows per block of the candidate search: bounds the [block, n_best, n_best] temporaries and
# lets each block drop the padding columns that all its windows share.
WINDOWS_PER_BLOCK = 512


def _masked(logits: np.ndarray, context: np.ndarray) -> np.ndarray:
    """Logits with -inf outside the context, in a dtype fast to select in.

    float16 arithmetic is emulated and slow; widening to float32 is exact, so the selection
    (and its ties) is the same as on the original values.
    """
    dtype = np.dtype(np.float32) if logits.dtype.itemsize <= 4 else logits.dtype
    return np.where(context, logits.astype(dtype, copy=False), dtype.type(-np.inf))


def _top_k(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values of each row; equal values go to the lower index."""
    rows, length = values.shape
    if k >= length:
        return np.broadcast_to(np.arange(length), values.shape)
    # A (SIMD) value sort finds each row's k-th largest value faster than argpartition; the
    # positions at or above it are the top k unless the k-th value is tied, and those (rare)
    # rows are redone with a stable sort so the chosen set is always well defined.
    kth = np.sort(values, axis=1)[:, length - k]
    take = values >= kth[:, None]
    exact = np.count_nonzero(take, axis=1) == k
    top = np.empty((rows, k), dtype=np.int64)
    take &= exact[:, None]
    # Row-major flat positions: exactly k per exact row (cheaper than a 2-D np.nonzero).
    top[exact] = np.flatnonzero(take).reshape(-1, k) - (np.flatnonzero(exact) * length)[:, None]
    if not exact.all():
        top[~exact] = np.argsort(-values[~exact], axis=1, kind="stable")[:, :k]
    return top


def _repeats(chars: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Rows in which two usable positions share a character offset."""
    # Unusable positions get distinct negative values so that they never match.
    filler = -2 - np.arange(chars.shape[1])
    ordered = np.sort(np.where(ok, chars, filler), axis=1)
    return (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)


def _top_positions(
    logits: np.ndarray,
    offsets: np.ndarray,
    block_context: np.ndarray,
    rows: np.ndarray,
    columns: slice,
    k: int,
    edge: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(positions within columns, usable?, masked value, character offset) of each window's
    ``k`` best positions; ``edge`` picks the offset: 0 = a token's start, 1 = its end."""
    n, width = block_context.shape
    masked = _masked(logits[rows, columns], block_context)
    top = _top_k(masked, k)  # [n, k], positions within columns
    # Flat 1-D takes: much cheaper than fancy indexing with 2-D index arrays.
    in_block = (np.arange(n) * width)[:, None]
    usable = block_context.ravel().take(top + in_block)
    value = masked.ravel().take(top + in_block)
    # Offsets come from the full array: copying the block's offsets would cost more.
    in_full = ((rows * offsets.shape[1] + columns.start) * 2)[:, None]
    chars = offsets.ravel().take(2 * top + in_full + edge)
    return top, usable, value, chars


def _prune(
    valid: np.ndarray,
    start_value: np.ndarray,
    end_value: np.ndarray,
    repeats: np.ndarray,
    n_best: int,
) -> None:
    """Drop (in ``valid``) the candidates that have ``n_best`` better ones in their window.

    Those are distinct spans, unless two positions share a character offset (byte-level
    vocabularies split one character into several tokens), so such windows (``repeats``)
    are not pruned. The cut is found on sums in the selection dtype. Rounding is monotone, so
    a sum below the rounded n_best-th largest by more than one step has n_best sums above it
    in float64 too.
    """
    n, k = start_value.shape
    rough = np.full(valid.shape, -np.inf, dtype=start_value.dtype)
    np.add(start_value[:, :, None], end_value[:, None, :], out=rough, where=valid)
    kth = np.sort(rough.reshape(n, -1), axis=1)[:, k * k - n_best]
    kth = np.nextafter(kth, kth.dtype.type(-np.inf))
    kth[repeats] = -np.inf
    valid &= rough >= kth[:, None, None]


def _candidates(
    start: np.ndarray,
    end: np.ndarray,
    offsets: np.ndarray,
    context: np.ndarray,
    rows: np.ndarray,
    columns: slice,
    n_best: int,
    max_answer_length: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Valid (row of ``rows``, char start, char end, score) of one block of windows.

    ``columns`` holds every context position of these windows. Only candidates that can still
    reach their example's n-best are returned.
    """
    block_context = context[rows, columns]
    k = min(n_best, block_context.shape[1])
    starts, start_ok, start_value, start_char = _top_positions(
        start, offsets, block_context, rows, columns, k, 0
    )
    ends, end_ok, end_value, end_char = _top_positions(
        end, offsets, block_context, rows, columns, k, 1
    )

    # int32 halves the memory traffic of the [n, k, k] arrays below.
    start_pos, end_pos = starts.astype(np.int32), ends.astype(np.int32)
    span = end_pos[:, None, :] - start_pos[:, :, None]  # [n, k, k] answer length in tokens - 1
    # 0 <= span < max_answer_length in one comparison: negative spans wrap to huge values.
    valid = span.view(np.uint32) < max_answer_length
    valid &= start_ok[:, :, None]
    valid &= end_ok[:, None, :]
    # A span must cover at least one character (zero-width tokens exist in some vocabularies).
    valid &= end_char[:, None, :] > start_char[:, :, None]

    # A candidate with n_best better ones in its own window cannot make its example's n-best.
    if k * k > n_best:
        repeats = _repeats(start_char, start_ok) | _repeats(end_char, end_ok)
        _prune(valid, start_value, end_value, repeats, n_best)
    pair = np.flatnonzero(valid)  # = (row * k + i) * k + j for start i and end j
    at_start = pair // k  # row * k + i
    row = at_start // k
    at_end = row * k + pair % k  # row * k + j
    # Scores in float64: float16/float32 logits are summed without rounding.
    score = start_value.ravel()[at_start].astype(np.float64) + end_value.ravel()[at_end]
    return row, start_char.ravel()[at_start], end_char.ravel()[at_end], score


def pack_keys(*keys: np.ndarray) -> np.ndarray | None:
    """One int64 key ordered like the non-negative int keys (first = primary); None on overflow."""
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    capacity = 1
    for key in keys:
        size = int(key.max()) + 1
        capacity *= size
        if capacity >= 2**63:
            return None
        packed = packed * size + key
    return packed


def _descending(score: np.ndarray) -> np.ndarray:
    """int64 keys whose ascending order is the descending order of float64 scores."""
    # Stable sorts of ints are several times faster than of floats. A float's bit pattern orders
    # like a signed int once the magnitude bits of negative numbers are flipped; adding 0.0 turns
    # -0.0 into 0.0 so that equal scores get equal keys.
    bits = (score + 0.0).view(np.int64)
    return ~np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)


def _all_candidates(
    feature_group: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    offsets: np.ndarray,
    n_best: int,
    max_answer_length: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(group, char start, char end, score) of every candidate, block by block of windows."""
    # Both offsets are >= 0 exactly when their bitwise or is (one pass instead of two).
    # A zero-width token (byte-level BPE's lone spaces, a whitespace-only piece) carries no
    # characters: as a start or an end it would pull in the whitespace before or after it.
    context = ((offsets[..., 0] | offsets[..., 1]) >= 0) & (offsets[..., 1] > offsets[..., 0])
    has_context = context.any(axis=1)
    first = np.where(has_context, context.argmax(axis=1), 0)
    stop = np.where(has_context, context.shape[1] - context[:, ::-1].argmax(axis=1), 0)
    # Windows sorted by where their context ends, so that a block of them shares long padding;
    # the search itself never depends on the order of the windows.
    by_stop = np.argsort(stop, kind="stable")
    empty = np.zeros(0, dtype=np.int64)
    parts = [(empty, empty, empty, np.zeros(0))]
    for lo in range(0, len(by_stop), WINDOWS_PER_BLOCK):
        rows = by_stop[lo : lo + WINDOWS_PER_BLOCK]
        columns = slice(int(first[rows].min()), int(stop[rows].max()))
        if columns.stop <= columns.start:
            continue
        f, cs, ce, sc = _candidates(
            start, end, offsets, context, rows, columns, n_best, max_answer_length
        )
        parts.append((feature_group[rows[f]], cs, ce, sc))
    group, cs, ce, sc = (np.concatenate(column) for column in zip(*parts, strict=True))
    return group, cs, ce, sc


def _dedupe(
    group: np.ndarray, cs: np.ndarray, ce: np.ndarray, sc: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One entry per (group, start, end), with the highest score of its copies, in that
    order."""
    key = pack_keys(group, cs, ce)
    # Too many examples x characters to pack into one key: the slower lexsort.
    order = np.lexsort((ce, cs, group)) if key is None else np.argsort(key)
    group, cs, ce, sc = group[order], cs[order], ce[order], sc[order]
    new = (group[1:] != group[:-1]) | (cs[1:] != cs[:-1]) | (ce[1:] != ce[:-1])
    head = np.flatnonzero(np.r_[True, new])
    sc = np.maximum.reduceat(sc, head)
    return group[head], cs[head], ce[head], sc


def search(
    feature_group: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    offsets: np.ndarray,
    n_best: int,
    max_answer_length: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Deduplicated n-best (group, char start, char end, score, probability), best first."""
    if n_best < 1 or max_answer_length < 1:
        raise ValueError("n_best and max_answer_length must be at least 1")
    group, cs, ce, sc = _all_candidates(
        feature_group, start, end, offsets, n_best, max_answer_length
    )
    if len(sc) == 0:
        return group, cs, ce, sc, sc.copy()
    group, cs, ce, sc = _dedupe(group, cs, ce, sc)

    # Rank within each group: best score first, then leftmost and shortest for equal scores
    # (the current (start, end) order breaks ties).
    order = _best_first(group, sc)
    group, cs, ce, sc = group[order], cs[order], ce[order], sc[order]
    head, sizes = _runs(group)
    rank = np.arange(len(sc)) - np.repeat(head, sizes)
    keep = rank < n_best
    group, cs, ce, sc = group[keep], cs[keep], ce[keep], sc[keep]

    # Softmax over each group's kept scores, shifted by the group's best for stability.
    head, sizes = _runs(group)
    weight = np.exp(sc - np.repeat(sc[head], sizes))
    prob = weight / np.repeat(np.add.reduceat(weight, head), sizes) if len(sc) else weight
    return group, cs, ce, sc, prob


def _best_first(group: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Indices ordering by group, then descending score; equal scores keep their order."""
    descending = _descending(score)
    by_score = np.argsort(descending)
    ordered = descending[by_score]
    # Dense ranks make (group, rank, position) one packable int key: an unstable sort of unique
    # keys is several times faster than two stable sorts.
    rank = np.empty(len(score), dtype=np.int64)
    rank[by_score] = np.cumsum(np.r_[False, ordered[1:] != ordered[:-1]])
    key = pack_keys(group, rank, np.arange(len(score)))
    if key is None:
        return np.lexsort((rank, group))
    return np.argsort(key)


def _runs(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of each run of equal values in a sorted array."""
    if len(group) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    head = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    return head, np.diff(np.r_[head, len(group)])
