"""Choose the no-answer threshold on held-out questions.

The official SQuAD v2 search (``metrics.squad_v2``'s ``best_f1_thresh``) starts from predictions
that were already decoded with a threshold, so it can only find thresholds that abstain more
often, and it reports 0.0 when abstaining on every question scores best. Choosing a setting
needs neither limit: here every question keeps its best span (``nbest[0]``), and the F1 of
every threshold is counted, from "abstain on all" to "answer all".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from qa_finetune.decoding.spans import Predictions
from qa_finetune.metrics import v2_question_scores

# Beyond the lowest (or highest) null-score difference, the threshold sits this far out.
_MARGIN = 1.0


def tune_no_answer_threshold(
    predictions: Predictions,
    references: Mapping[str, Sequence[str]],
    scores: Mapping[str, float] | None = None,
) -> tuple[float, float]:
    """The threshold with the best official v2 F1 on ``references`` and that F1 (x100).

    A question abstains when its no-answer score (``scores``, by default the predictions'
    own) is above the threshold (the rule of ``decoding.no_answer.abstains``). Among equally
    good thresholds the one nearest 0 (the default) is taken, placed halfway between the two
    scores that bound it, so a new question near the boundary is not decided by the last digit.
    """
    if not references:
        raise ValueError("no questions to choose a threshold on")
    scores = predictions.no_answer_score if scores is None else scores
    diffs, answered, abstained = [], [], []
    for qid, answers in references.items():
        nbest = predictions.nbest.get(qid) or []
        span = nbest[0]["text"] if nbest else ""
        diffs.append(scores.get(qid, math.inf))
        answered.append(v2_question_scores(span, answers)[1])
        abstained.append(v2_question_scores("", answers)[1])
    order = np.argsort(np.asarray(diffs), kind="stable")
    diff = np.asarray(diffs)[order]
    gain = (np.asarray(answered) - np.asarray(abstained))[order]
    finite = np.isfinite(diff)
    diff, gain = diff[finite], gain[finite]
    base = float(np.sum(abstained))
    if not len(diff):
        return 0.0, 100.0 * base / len(references)
    # Thresholds between distinct differences: answer every question up to group k.
    last_of_group = np.append(diff[1:] != diff[:-1], True)
    totals = np.concatenate([[base], base + np.cumsum(gain)[last_of_group]])
    ends = diff[last_of_group]
    candidates = np.concatenate(
        [[ends[0] - _MARGIN], (ends[:-1] + ends[1:]) / 2, [ends[-1] + _MARGIN]]
    )
    best = totals.max()
    tied = np.flatnonzero(np.isclose(totals, best, rtol=0, atol=1e-9))
    chosen = tied[np.argmin(np.abs(candidates[tied]))]
    return float(candidates[chosen]), 100.0 * float(best) / len(references)
