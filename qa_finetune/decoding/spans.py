"""Turn start/end logits of strided windows into answer spans of the original context.

Pure NumPy: no TensorFlow, no tokenizer. Offsets are an int array ``[features, length, 2]`` of
character offsets into the context, ``-1`` where a position is not a context token (question,
special or padding token).

Candidate search (``decoding/span_search``), for every window: the ``n_best`` highest-scoring
context positions as starts times the ``n_best`` highest as ends; a pair is kept when
``end >= start``, it spans at most ``max_answer_length`` tokens and it covers at least one
character; zero-width tokens are neither starts nor ends. Its score is
``start_logit + end_logit`` (in float64). Equal logits are ranked by lower position, so the
result never depends on sort internals. Identical character spans from overlapping windows
count once, with their higher score. Text is always sliced from the context by character
offsets, never decoded from tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from qa_finetune.decoding.no_answer import NoAnswerScorer, abstains, null_gap_score
from qa_finetune.decoding.no_answer_signals import (
    SIGNALS,
    question_signals,
    window_null_log_probability,
)
from qa_finetune.decoding.span_search import search
from qa_finetune.features.arrays import Ragged


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
    """Answers, n-best lists, no-answer scores and signals, keyed by example id."""

    answers: dict[str, str] = field(default_factory=dict)
    # Each entry: {"text", "start", "end", "score", "probability"}, best first.
    nbest: dict[str, list[dict]] = field(default_factory=dict)
    # Null score minus best span score; +inf when an example has no valid span.
    null_score_diff: dict[str, float] = field(default_factory=dict)
    # The no-answer rule's score (higher: more likely unanswerable; +inf: no valid span).
    # The null-score difference itself under the default rule.
    no_answer_score: dict[str, float] = field(default_factory=dict)
    # Each question's signals by name (decoding.no_answer_signals), for fitting a rule.
    signals: dict[str, dict[str, float]] = field(default_factory=dict)


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
    _, char_start, char_end, score, prob = search(
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
    allow_no_answer: bool = False,
    no_answer_threshold: float = 0.0,
    rule: NoAnswerScorer | None = None,
) -> Predictions:
    """Answers for a batch of examples from the logits of their features ``[F, L]``.

    With ``allow_no_answer`` the answer is "" when the no-answer score (``rule``'s; by
    default ``null - best``) is above ``no_answer_threshold`` or no valid span exists;
    ``cls_index`` is then required. Null-score differences, no-answer scores and signals are
    filled whenever ``cls_index`` is given. An example without features gets "" and no n-best.
    """
    if len(example_ids) != len(contexts):
        raise ValueError(f"{len(example_ids)} example ids but {len(contexts)} contexts")
    if allow_no_answer and cls_index is None:
        raise ValueError("allow_no_answer needs cls_index (the CLS position per feature)")
    start, end, offs = _check_inputs(start_logits, end_logits, offsets)
    feature_group = _feature_groups(example_ids, feature_example_ids, start.shape[0])
    group, char_start, char_end, score, prob = search(
        feature_group, start, end, offs, n_best, max_answer_length
    )
    # Candidates come grouped by example, best first: example i owns bounds[i]:bounds[i + 1].
    bounds = np.searchsorted(group, np.arange(len(example_ids) + 1))
    entries = _entries(contexts, group, char_start, char_end, score, prob)
    found = bounds[1:] > bounds[:-1]
    abstain = ~found
    with_diff = np.zeros(len(example_ids), dtype=bool)
    no_answer = np.full(len(example_ids), np.inf)
    signals: dict[str, np.ndarray] = {}
    if cls_index is not None:
        with_diff = np.bincount(feature_group, minlength=len(example_ids)) > 0
        logits = (start, end, offs, np.asarray(cls_index))
        signals = _signals(feature_group, len(example_ids), logits, bounds, score, prob)
        no_answer = null_gap_score(signals) if rule is None else rule.score(signals)
        if allow_no_answer:
            abstain |= abstains(no_answer, no_answer_threshold)
    return _collect(example_ids, entries, bounds, abstain, with_diff, no_answer, signals)


def _collect(
    example_ids: Sequence[str],
    entries: list[dict],
    bounds: np.ndarray,
    abstain: np.ndarray,
    with_diff: np.ndarray,
    no_answer: np.ndarray,
    signals: dict[str, np.ndarray],
) -> Predictions:
    """The ``Predictions`` of every example from the decoded arrays (Python values)."""
    out = Predictions()
    # No valid span: the difference is +inf (infinitely more likely unanswerable).
    gap = signals.get("null_gap")
    diff = no_answer if gap is None else np.where(np.isnan(gap), np.inf, gap)
    bounds_l, abstain_l, diff_l = bounds.tolist(), abstain.tolist(), diff.tolist()
    score_l = no_answer.tolist()
    rows = list(zip(*(signals[name].tolist() for name in SIGNALS), strict=True)) if signals else []
    for i, (example_id, has_diff) in enumerate(zip(example_ids, with_diff.tolist(), strict=True)):
        lo, hi = bounds_l[i], bounds_l[i + 1]
        out.nbest[example_id] = entries[lo:hi]
        out.answers[example_id] = "" if abstain_l[i] else entries[lo]["text"]
        if has_diff:
            out.null_score_diff[example_id] = diff_l[i]
            out.no_answer_score[example_id] = score_l[i]
            out.signals[example_id] = dict(zip(SIGNALS, rows[i], strict=True))
    return out


def _signals(
    feature_group: np.ndarray,
    examples: int,
    logits: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    bounds: np.ndarray,
    score: np.ndarray,
    prob: np.ndarray,
) -> dict[str, np.ndarray]:
    """Each example's no-answer signals from its windows' ``(start, end, offsets, cls_index)``;
    its n-best candidates are ``bounds[i]:bounds[i + 1]`` of ``score`` and ``prob``."""
    start, end, offsets, cls_index = logits
    null = np.full(examples, np.inf)
    np.minimum.at(null, feature_group, _cls_scores(start, end, cls_index))
    null_log_prob = window_null_log_probability(start, end, offsets[..., 0] >= 0, cls_index)
    first, count = bounds[:-1], bounds[1:] - bounds[:-1]
    return question_signals(feature_group, examples, null, null_log_prob, first, count, score, prob)


def _feature_groups(
    example_ids: Sequence[str], feature_example_ids: Sequence[str], features: int
) -> np.ndarray:
    """The index in ``example_ids`` of each feature's example."""
    if len(feature_example_ids) != features:
        raise ValueError(f"{len(feature_example_ids)} feature ids but {features} features")
    position = {example_id: i for i, example_id in enumerate(example_ids)}
    if len(position) != len(example_ids):
        raise ValueError("example_ids contains duplicates")
    try:
        return np.fromiter(
            (position[i] for i in feature_example_ids),
            dtype=np.int64,
            count=len(feature_example_ids),
        )
    except KeyError as err:
        raise ValueError(f"feature refers to unknown example id {err.args[0]!r}") from None


def _entries(
    contexts: Sequence[str],
    group: np.ndarray,
    char_start: np.ndarray,
    char_end: np.ndarray,
    score: np.ndarray,
    prob: np.ndarray,
) -> list[dict]:
    """Every n-best entry in one flat pass; per-example lists are then plain slices."""
    return [
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
