"""What a reader's outputs say about whether a question has an answer in its context.

The classic SQuAD v2 rule looks at one number, the null score minus the best span's score.
These signals add what that number leaves out, each per question and computed from the same
logits, so any rule built on them works wherever answers are decoded (``evaluate``, ``ask``,
``serve``, exports):

- ``null_gap``: null score minus the best span's score (the classic rule's number);
- ``null``: the null score, the lowest ``start[CLS] + end[CLS]`` over the question's windows;
- ``best``: the best span's score (start + end logits);
- ``best_probability``: the best span's share among the n-best candidates (a flat n-best
  means the reader found nothing it is sure of);
- ``runner_up_gap``: the best span's score minus the second's (capped: none counts as far);
- ``null_probability``: the highest probability over the windows that both the start and the
  end sit on CLS, the logits normalised over each window's context and CLS (unlike the raw
  scores, comparable between questions);
- ``windows``: log of the number of windows (long contexts offer more wrong spans).

A question with no valid span has no signals: every rule abstains on it.
"""

from __future__ import annotations

import numpy as np

SIGNALS = (
    "null_gap",
    "null",
    "best",
    "best_probability",
    "runner_up_gap",
    "null_probability",
    "windows",
)
# A question with a single candidate: its runner-up counts as this far behind (logit units).
RUNNER_UP_CAP = 20.0


def window_null_log_probability(
    start: np.ndarray, end: np.ndarray, context: np.ndarray, cls_index: np.ndarray
) -> np.ndarray:
    """Per window, log P(start = CLS) + log P(end = CLS), softmax over context tokens and CLS."""
    rows = np.arange(start.shape[0])
    cls = np.asarray(cls_index, dtype=np.int64)
    allowed = context.copy()
    allowed[rows, cls] = True
    total = np.zeros(start.shape[0])
    for logits in (start, end):
        values = np.where(allowed, logits.astype(np.float64), -np.inf)
        peak = values.max(axis=1)
        log_norm = peak + np.log(np.exp(values - peak[:, None]).sum(axis=1))
        total += values[rows, cls] - log_norm
    return total


def question_signals(
    feature_group: np.ndarray,
    examples: int,
    null: np.ndarray,
    window_null_log_prob: np.ndarray,
    first: np.ndarray,
    count: np.ndarray,
    score: np.ndarray,
    probability: np.ndarray,
) -> dict[str, np.ndarray]:
    """Every signal of each of ``examples`` questions, as float64 arrays (NaN where a question
    has no valid span).

    ``null`` is per question; ``window_null_log_prob`` per window with ``feature_group``
    mapping windows to questions; ``first`` and ``count`` locate each question's n-best
    candidates (best first) in ``score`` and ``probability``.
    """
    found = count > 0
    # One NaN past the end: every index below is valid even with no candidates at all.
    score = np.append(score, np.nan)
    probability = np.append(probability, np.nan)
    head = np.where(found, first, len(score) - 1)
    best = score[head]
    has_second = count > 1
    second = score[np.where(has_second, head + 1, len(score) - 1)]
    null_log_prob = np.full(examples, -np.inf)
    np.maximum.at(null_log_prob, feature_group, window_null_log_prob)
    windows = np.bincount(feature_group, minlength=examples).astype(np.float64)
    signals = {
        "null_gap": null - best,
        "null": null,
        "best": best,
        "best_probability": probability[head],
        "runner_up_gap": np.where(
            has_second, np.minimum(best - second, RUNNER_UP_CAP), RUNNER_UP_CAP
        ),
        "null_probability": np.exp(null_log_prob),
        "windows": np.log(np.maximum(windows, 1.0)),
    }
    return {name: np.where(found, values, np.nan) for name, values in signals.items()}
