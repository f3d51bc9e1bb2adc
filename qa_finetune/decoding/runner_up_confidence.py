"""A calibrated confidence for the answers after the first (``--top-k``).

Without it, the later candidates share what the first answer's confidence leaves
(``decoding.confident_answer.runner_up_confidence``): a lower bound, since candidates are not
exclusive (a shorter or longer span of the right answer often matches a gold answer too), and
measured, they were right two to four times as often as it said on general questions. This one
is fitted on the ranked lists of the held-out questions the run was calibrated on, candidates 2
to ``RANKS``, from what the list already shows:

- ``share``: the log-odds of the candidate's share of the reader's score (one softmax over the
  spans and "no answer");
- ``share_ratio``: the log of its share over the first answer's;
- ``first_confidence``: the log-odds of the first answer's confidence;
- ``rank``: its place in the list (2, 3, ...);
- ``overlap``: the official SQuAD F1 of its words against the first answer's: a candidate that
  overlaps a right first answer is often right too;
- ``no_answer``: 1 for the "no answer" candidate.

It is saved in ``calibration.json`` under ``runner_up`` when it beats the share of what is left
on held-out folds, and then gives every later candidate of ``ask``, ``ask --batch`` and
``serve`` its confidence. Across passages (``--index``) the shares mean something else, so
those keep the share of what is left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qa_finetune.decoding.confident_answer import runner_up_confidence
from qa_finetune.decoding.feature_logistic import FeatureLogistic
from qa_finetune.decoding.feature_logistic_fit import fit_feature_logistic
from qa_finetune.decoding.no_answer import rank_answers
from qa_finetune.decoding.runner_up_features import RANKS, RUNNER_UP_FEATURES, runner_up_features
from qa_finetune.metrics import v2_question_scores

SHARE_RULE = "share_of_the_rest"


def fit_runner_up(
    predictions: Any,
    references: Mapping[str, Sequence[str]],
    first_confidences: Mapping[str, float],
    abstained: Mapping[str, bool],
    threshold: float,
    fitted_on: str,
) -> FeatureLogistic:
    """The runner-up calibration fitted on each held-out question's candidates 2 to
    ``RANKS`` (``later_candidates``); a ``CalibrationError`` when it cannot beat the share of
    what is left, or the answers cannot fit one."""
    rows, right, shares = later_candidates(
        predictions, references, first_confidences, abstained, threshold
    )
    return fit_feature_logistic(
        rows, right, RUNNER_UP_FEATURES, shares, SHARE_RULE, "answers after the first", fitted_on
    )


def later_candidates(
    predictions: Any,
    references: Mapping[str, Sequence[str]],
    first_confidences: Mapping[str, float],
    abstained: Mapping[str, bool],
    threshold: float,
) -> tuple[list[dict[str, float]], np.ndarray, np.ndarray]:
    """Candidates 2 to ``RANKS`` of each question's list, ranked as ``ask --top-k
    --allow-no-answer`` ranks them (``abstained``: the run's rule's decision, ``threshold``
    its threshold) after a first answer of confidence ``first_confidences[id]``: their
    features, whether each is right (exact match), and the share of what the first leaves."""
    rows, right, shares = [], [], []
    for qid, gold in references.items():
        spans = predictions.nbest.get(qid) or []
        signals = predictions.signals.get(qid)
        if not spans or not signals or qid not in first_confidences:
            continue
        candidates = [
            {"answer": c["text"], "score": c["score"], "start": c["start"], "end": c["end"]}
            for c in spans
        ]
        ranked = rank_answers(candidates, RANKS, signals["null"], threshold, abstained[qid])
        first = first_confidences[qid]
        for k, answer in enumerate(ranked[1:], start=2):
            share = float(answer["score"])
            rows.append(runner_up_features(answer["answer"], share, k, ranked[0], first))
            right.append(v2_question_scores(answer["answer"], gold)[0] == 1.0)
            shares.append(runner_up_confidence(first, float(ranked[0]["score"]), share))
    return rows, np.asarray(right, dtype=bool), np.asarray(shares, dtype=np.float64)
