"""Turn start/end logits of strided windows into answer spans of the original context.

Pure NumPy: no TensorFlow, no tokenizer. Offsets are an int array ``[features, length, 2]`` of
character offsets into the context, ``-1`` where a position is not a context token (question,
special or padding token).

Candidate search, for every window: the ``n_best`` highest-scoring context positions as starts
times the ``n_best`` highest as ends; a pair is kept when ``end >= start``, it spans at most
``max_answer_length`` tokens and it covers at least one character; zero-width tokens are
neither starts nor ends. Its score is
``start_logit + end_logit`` (in float64). Equal logits are ranked by lower position, so the
result never depends on sort internals. Identical character spans from overlapping windows
count once, with their higher score. Text is always sliced from the context by character
offsets, never decoded from tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from qa_finetune.core.arrays import Ragged
from qa_finetune.core.no_answer import abstains

# Windows per block of the candidate search: bounds the [block, n_best, n_best] temporaries and
# lets each block drop the padding columns that all its windows share.
_BLOCK = 512
_NOT_CONTEXT = (-1, -1)


@dataclass(frozen=True)
class Span:
    """One answer candidate: ``text == context[start:end]`` (character offsets, end exclusive)."""

    text: str
    start: int
    end: int
    score: float
    probability: float


@dataclass
class Predictions:
    """Answers, n-best lists and SQuAD v2 null-score differences, keyed by example id."""

    answers: dict[str, str] = field(default_factory=dict)
    # Each entry: {"text", "start", "end", "score", "probability"}, best first.
    nbest: dict[str, list[dict]] = field(default_factory=dict)
    # Null score minus best span score; +inf when an example has no valid span.
    null_score_diff: dict[str, float] = field(default_factory=dict)


def offsets_to_array(
    offset_mapping: Sequence[Sequence[tuple[int, int] | list[int] | None]],
    length: int | None = None,
) -> np.ndarray:
    """Per-feature offset lists (None = not context) -> int64 ``[features, length, 2]``, -1 pad;
    a feature with more than ``length`` offsets is a ValueError."""
    return Ragged.from_pairs(offset_mapping).padded(width=length, fill=-1)


def best_spans(
    context: str,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    offsets: np.ndarray,
    n_best: int = 20,
    max_answer_length: int = 30,
) -> list[Span]:
    """The ``n_best`` best spans across all windows ``[windows, L]`` of one example, best first."""
    start, end, offs = _check_inputs(start_logits, end_logits, offsets)
    groups = np.zeros(start.shape[0], dtype=np.int64)
    _, char_start, char_end, score, prob = _search(
        groups, start, end, offs, n_best, max_answer_length
    )
    return [
        Span(context[s:e], s, e, sc, p)
        for s, e, sc, p in zip(
            char_start.tolist(), char_end.tolist(), score.tolist(), prob.tolist(), strict=True
        )
    ]


def null_score(start_logits: np.ndarray, end_logits: np.ndarray, cls_index: np.ndarray) -> float:
    """SQuAD v2 null score: the minimum over windows of ``start[cls] + end[cls]``."""
    start, end = np.atleast_2d(start_logits), np.atleast_2d(end_logits)
    return float(_cls_scores(start, end, np.atleast_1d(cls_index)).min())


def postprocess_predictions(
    example_ids: Sequence[str],
    contexts: Sequence[str],
    feature_example_ids: Sequence[str],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    offsets: np.ndarray,
    cls_index: np.ndarray | None = None,
    n_best: int = 20,
    max_answer_length: int = 30,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> Predictions:
    """Answers for a batch of examples from the logits of their features ``[F, L]``.

    With ``version_2_with_negative`` the answer is "" when ``null - best > threshold`` or no
    valid span exists; ``cls_index`` is then required. Null-score differences are filled
    whenever ``cls_index`` is given. An example without features gets "" and no n-best.
    """
    if len(example_ids) != len(contexts):
        raise ValueError(f"{len(example_ids)} example ids but {len(contexts)} contexts")
    if version_2_with_negative and cls_index is None:
        raise ValueError("version_2_with_negative needs cls_index (the CLS position per feature)")
    start, end, offs = _check_inputs(start_logits, end_logits, offsets)
    if len(feature_example_ids) != start.shape[0]:
        raise ValueError(f"{len(feature_example_ids)} feature ids but {start.shape[0]} features")
    position = {example_id: i for i, example_id in enumerate(example_ids)}
    if len(position) != len(example_ids):
        raise ValueError("example_ids contains duplicates")
    try:
        feature_group = np.fromiter(
            (position[i] for i in feature_example_ids),
            dtype=np.int64,
            count=len(feature_example_ids),
        )
    except KeyError as err:
        raise ValueError(f"feature refers to unknown example id {err.args[0]!r}") from None

    group, char_start, char_end, score, prob = _search(
        feature_group, start, end, offs, n_best, max_answer_length
    )
    # Candidates come grouped by example, best first: example i owns bounds[i]:bounds[i + 1].
    bounds = np.searchsorted(group, np.arange(len(example_ids) + 1))
    # One flat pass builds every n-best entry; per-example lists are then plain slices.
    entries = [
        {"text": contexts[g][s:e], "start": s, "end": e, "score": sc, "probability": p}
        for g, s, e, sc, p in zip(
            group.tolist(),
            char_start.tolist(),
            char_end.tolist(),
            score.tolist(),
            prob.tolist(),
            strict=True,
        )
    ]
    found = bounds[1:] > bounds[:-1]
    best = np.full(len(example_ids), -np.inf)
    best[found] = score[bounds[:-1][found]]
    abstain = ~found
    with_diff = np.zeros(len(example_ids), dtype=bool)
    diff = np.full(len(example_ids), np.inf)
    if cls_index is not None:
        null = np.full(len(example_ids), np.inf)
        np.minimum.at(null, feature_group, _cls_scores(start, end, np.asarray(cls_index)))
        with_diff = np.bincount(feature_group, minlength=len(example_ids)) > 0
        # No valid span: the difference is +inf (infinitely more likely unanswerable).
        diff = np.where(found, null - best, np.inf)
        if version_2_with_negative:
            abstain |= abstains(diff, null_score_diff_threshold)

    out = Predictions()
    bounds_l, abstain_l, diff_l = bounds.tolist(), abstain.tolist(), diff.tolist()
    for i, (example_id, has_diff) in enumerate(zip(example_ids, with_diff.tolist(), strict=True)):
        lo, hi = bounds_l[i], bounds_l[i + 1]
        out.nbest[example_id] = entries[lo:hi]
        out.answers[example_id] = "" if abstain_l[i] else entries[lo]["text"]
        if has_diff:
            out.null_score_diff[example_id] = diff_l[i]
    return out


def _check_inputs(
    start_logits: np.ndarray, end_logits: np.ndarray, offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """2-D float logits and 3-D int64 offsets; a single window may come without its axis."""
    start, end = np.atleast_2d(np.asarray(start_logits)), np.atleast_2d(np.asarray(end_logits))
    if not np.issubdtype(start.dtype, np.floating):
        start = start.astype(np.float64)
    if not np.issubdtype(end.dtype, np.floating):
        end = end.astype(np.float64)
    # C order: the search gathers from the flattened array.
    offs = np.ascontiguousarray(offsets, dtype=np.int64)
    if offs.ndim == 2:
        offs = offs[None]
    if start.ndim != 2 or start.shape != end.shape or offs.shape != (*start.shape, 2):
        raise ValueError(
            f"shapes do not match: start {start.shape}, end {end.shape}, offsets {offs.shape}; "
            "expected [windows, L], [windows, L], [windows, L, 2]"
        )
    return start, end, offs


def _cls_scores(start: np.ndarray, end: np.ndarray, cls_index: np.ndarray) -> np.ndarray:
    rows = np.arange(start.shape[0])
    cls = cls_index.astype(np.int64)
    return start[rows, cls].astype(np.float64) + end[rows, cls].astype(np.float64)


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
    n, width = block_context.shape
    k = min(n_best, width)
    start_masked = _masked(start[rows, columns], block_context)
    end_masked = _masked(end[rows, columns], block_context)
    starts = _top_k(start_masked, k)  # [n, k], positions within columns
    ends = _top_k(end_masked, k)
    # Flat 1-D takes: much cheaper than fancy indexing with 2-D index arrays.
    in_block = (np.arange(n) * width)[:, None]
    start_ok = block_context.ravel().take(starts + in_block)
    end_ok = block_context.ravel().take(ends + in_block)
    start_value = start_masked.ravel().take(starts + in_block)
    end_value = end_masked.ravel().take(ends + in_block)
    # Offsets come from the full array: copying the block's offsets would cost more.
    in_full = ((rows * offsets.shape[1] + columns.start) * 2)[:, None]
    start_char = offsets.ravel().take(2 * starts + in_full)
    end_char = offsets.ravel().take(2 * ends + in_full + 1)

    # int32 halves the memory traffic of the [n, k, k] arrays below.
    start_pos, end_pos = starts.astype(np.int32), ends.astype(np.int32)
    span = end_pos[:, None, :] - start_pos[:, :, None]  # [n, k, k] answer length in tokens - 1
    # 0 <= span < max_answer_length in one comparison: negative spans wrap to huge values.
    valid = span.view(np.uint32) < max_answer_length
    valid &= start_ok[:, :, None]
    valid &= end_ok[:, None, :]
    # A span must cover at least one character (zero-width tokens exist in some vocabularies).
    valid &= end_char[:, None, :] > start_char[:, :, None]

    # A candidate with n_best better ones in its own window cannot make its example's n-best:
    # those are distinct spans, unless two positions share a character offset (byte-level
    # vocabularies split one character into several tokens), so such windows are not pruned.
    # The cut is found on sums in the selection dtype. Rounding is monotone, so a sum below the
    # rounded n_best-th largest by more than one step has n_best sums above it in float64 too.
    if k * k > n_best:
        rough = np.full(valid.shape, -np.inf, dtype=start_value.dtype)
        np.add(start_value[:, :, None], end_value[:, None, :], out=rough, where=valid)
        kth = np.sort(rough.reshape(n, -1), axis=1)[:, k * k - n_best]
        kth = np.nextafter(kth, kth.dtype.type(-np.inf))
        kth[_repeats(start_char, start_ok) | _repeats(end_char, end_ok)] = -np.inf
        valid &= rough >= kth[:, None, None]
    pair = np.flatnonzero(valid)  # = (row * k + i) * k + j for start i and end j
    at_start = pair // k  # row * k + i
    row = at_start // k
    at_end = row * k + pair % k  # row * k + j
    # Scores in float64: float16/float32 logits are summed without rounding.
    score = start_value.ravel()[at_start].astype(np.float64) + end_value.ravel()[at_end]
    return row, start_char.ravel()[at_start], end_char.ravel()[at_end], score


def _pack(*keys: np.ndarray) -> np.ndarray | None:
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


def _search(
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
    for lo in range(0, len(by_stop), _BLOCK):
        rows = by_stop[lo : lo + _BLOCK]
        columns = slice(int(first[rows].min()), int(stop[rows].max()))
        if columns.stop <= columns.start:
            continue
        f, cs, ce, sc = _candidates(
            start, end, offsets, context, rows, columns, n_best, max_answer_length
        )
        parts.append((feature_group[rows[f]], cs, ce, sc))
    group, cs, ce, sc = (np.concatenate(column) for column in zip(*parts, strict=True))

    if len(sc) == 0:
        return group, cs, ce, sc, sc.copy()

    # Dedupe: one entry per (group, start, end), with the highest score of its copies.
    key = _pack(group, cs, ce)
    # Too many examples x characters to pack into one key: the slower lexsort.
    order = np.lexsort((ce, cs, group)) if key is None else np.argsort(key)
    group, cs, ce, sc = group[order], cs[order], ce[order], sc[order]
    new = (group[1:] != group[:-1]) | (cs[1:] != cs[:-1]) | (ce[1:] != ce[:-1])
    head = np.flatnonzero(np.r_[True, new])
    sc = np.maximum.reduceat(sc, head)
    group, cs, ce = group[head], cs[head], ce[head]

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
    key = _pack(group, rank, np.arange(len(score)))
    if key is None:
        return np.lexsort((rank, group))
    return np.argsort(key)


def _runs(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of each run of equal values in a sorted array."""
    if len(group) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    head = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    return head, np.diff(np.r_[head, len(group)])
