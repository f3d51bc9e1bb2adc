"""Choose a run's no-answer rule and threshold on held-out questions.

Two candidates are compared on the same questions: the null-score gap with its best
threshold, and a logistic classifier over every signal (``decoding.no_answer_signals``).
The classifier is judged on scores it did not see in fitting (K folds, each question scored
by the model fitted on the others), so its extra parameters cannot buy it an edge; the rule
with the better F1 at its best threshold wins (the gap on a tie, or when there are too few
questions of either kind to fit on). The classifier kept is then fitted on every question,
and its threshold is the best one for the out-of-fold scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from qa_finetune.decoding.answerability import rank_auc
from qa_finetune.decoding.no_answer_rule import CLASSIFIER, NULL_GAP, NoAnswerRule
from qa_finetune.decoding.no_answer_signals import SIGNALS
from qa_finetune.decoding.spans import Predictions
from qa_finetune.decoding.threshold import tune_no_answer_threshold
from qa_finetune.errors import QAFinetuneError
from qa_finetune.metrics import normalize_answer

# Fewer questions than this of either kind: the classifier is not tried.
MIN_PER_KIND = 20
FOLDS = 5
# L2 penalty on the standardised weights: a mild pull towards 0 for correlated signals.
L2 = 1.0
MODES = ("auto", NULL_GAP, CLASSIFIER)
# Below these a threshold is still chosen, but with a warning. Measured (BENCHMARKS section
# 18): thresholds chosen on 200 questions drawn from SQuAD v2.0 dev scored the F1 of one chosen
# on 400 at the median (10th percentile: 3.6 lower); on 100, 0.7 lower (4.1); on 25 the 10th
# percentile was 12.8 lower. The general and review sets were steady from 100.
MIN_RULE_QUESTIONS = 200
MIN_RULE_UNANSWERABLE = 30


@dataclass(frozen=True)
class RuleChoice:
    """The rule chosen, its threshold, and how each candidate scored on the held-out questions."""

    rule: NoAnswerRule
    threshold: float
    # Per candidate kind: "f1" at its best threshold (x100) and "auc" (unanswerable above).
    compared: dict[str, dict[str, float]] = field(default_factory=dict)
    reason: str = ""

    @property
    def f1(self) -> float:
        return self.compared[self.rule.kind]["f1"]


def fit_logistic(features: np.ndarray, labels: np.ndarray, l2: float = L2) -> np.ndarray:
    """Weights (last: bias) of an L2-penalised logistic regression, by Newton's method."""
    rows, width = features.shape
    design = np.column_stack([features, np.ones(rows)])
    penalty = np.full(width + 1, l2)
    penalty[-1] = 0.0  # the bias is not pulled towards 0
    weights = np.zeros(width + 1)
    for _ in range(100):
        probability = 0.5 * (1.0 + np.tanh(0.5 * (design @ weights)))  # a stable sigmoid
        gradient = design.T @ (probability - labels) + penalty * weights
        curvature = probability * (1.0 - probability)
        hessian = (design * curvature[:, None]).T @ design + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.abs(step).max() < 1e-9:
            break
    return weights


def classifier_rule(signals: np.ndarray, unanswerable: np.ndarray) -> NoAnswerRule:
    """A ``classifier`` rule fitted on rows of ``signals`` (columns in ``SIGNALS`` order)."""
    mean = signals.mean(axis=0)
    scale = signals.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)  # a constant signal gets weight 0 anyway
    weights = fit_logistic((signals - mean) / scale, unanswerable.astype(np.float64))
    return NoAnswerRule(
        CLASSIFIER,
        SIGNALS,
        tuple(mean.tolist()),
        tuple(scale.tolist()),
        tuple(weights[:-1].tolist()),
        float(weights[-1]),
    )


def choose_no_answer_rule(
    predictions: Predictions,
    references: Mapping[str, Sequence[str]],
    mode: str = "auto",
    seed: int = 0,
) -> RuleChoice:
    """The rule for ``mode`` (``auto``: the better of the two on ``references``) and its
    threshold; ``predictions`` must carry each question's signals."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    ids = list(references)
    unanswerable = np.array([not any(normalize_answer(a) for a in references[q]) for q in ids])
    gap_scores = {q: predictions.null_score_diff.get(q, np.inf) for q in ids}
    gap_threshold, gap_f1 = tune_no_answer_threshold(predictions, references, gap_scores)
    compared = {NULL_GAP: {"f1": gap_f1, **_auc(gap_scores, ids, unanswerable)}}
    gap = RuleChoice(NoAnswerRule(), gap_threshold, compared)
    if mode == NULL_GAP:
        return gap
    matrix = np.array([[_signal(predictions, q, name) for name in SIGNALS] for q in ids])
    usable = ~np.isnan(matrix).any(axis=1)
    kinds = np.bincount(unanswerable[usable].astype(np.int64), minlength=2)
    if kinds.min() < MIN_PER_KIND:
        why = f"too few questions of each kind to fit a classifier ({kinds[0]} with an answer, "
        why += f"{kinds[1]} without)"
        if mode == CLASSIFIER:
            raise QAFinetuneError(
                f"{why}: choose on more held-out questions (at least {MIN_PER_KIND} of each "
                "kind), or let the rule be chosen (auto)"
            )
        return RuleChoice(gap.rule, gap.threshold, compared, why)
    out_of_fold = _out_of_fold_scores(matrix, unanswerable, usable, seed)
    held = dict(zip(ids, out_of_fold.tolist(), strict=True))
    threshold, f1 = tune_no_answer_threshold(predictions, references, held)
    compared[CLASSIFIER] = {"f1": f1, **_auc(held, ids, unanswerable)}
    rule = classifier_rule(matrix[usable], unanswerable[usable])
    fitted = RuleChoice(rule, threshold, compared)
    if mode == CLASSIFIER or f1 > gap_f1:
        return fitted
    return RuleChoice(gap.rule, gap.threshold, compared, "the null-score gap scored as well")


def rule_size_warnings(references: Mapping[str, Sequence[str]]) -> list[str]:
    """What to tell users about a rule chosen on these held-out questions."""
    count = len(references)
    unanswerable = sum(1 for a in references.values() if not any(normalize_answer(x) for x in a))
    found = []
    if count < MIN_RULE_QUESTIONS:
        found.append(
            f"the no-answer threshold was chosen on {count} held-out questions (fewer than "
            f"{MIN_RULE_QUESTIONS}): it may refuse questions it should answer, or the reverse"
        )
    if unanswerable < MIN_RULE_UNANSWERABLE:
        found.append(
            f"only {unanswerable} held-out questions without an answer chose the no-answer "
            f"threshold (fewer than {MIN_RULE_UNANSWERABLE})"
        )
    return found


def _signal(predictions: Predictions, question: str, name: str) -> float:
    values = predictions.signals.get(question)
    return float(values[name]) if values and name in values else np.nan


def _out_of_fold_scores(
    matrix: np.ndarray, unanswerable: np.ndarray, usable: np.ndarray, seed: int
) -> np.ndarray:
    """Each usable question scored by a classifier fitted on the other folds (+inf: unusable)."""
    scores = np.full(len(matrix), np.inf)
    rows = np.flatnonzero(usable)
    fold = np.random.default_rng(seed).permutation(len(rows)) % FOLDS
    for k in range(FOLDS):
        rule = classifier_rule(matrix[rows[fold != k]], unanswerable[rows[fold != k]])
        held = rows[fold == k]
        scores[held] = rule.score(dict(zip(SIGNALS, matrix[held].T, strict=True)))
    return scores


def _auc(scores: Mapping[str, float], ids: list[str], unanswerable: np.ndarray) -> dict[str, float]:
    values = np.array([scores[q] for q in ids])
    if unanswerable.all() or not unanswerable.any():
        return {}
    return {"auc": rank_auc(values[unanswerable], values[~unanswerable])}
