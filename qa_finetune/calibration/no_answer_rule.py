"""A run's no-answer rule: from a question's signals to its no-answer score, and its choice
(rule and threshold) on held-out questions.

A question is answered "no answer" when its no-answer score is above the run's threshold
(``decoding.no_answer.abstains``). Two kinds of rule make the score:

- ``null_gap`` (every run without a rule of its own, and the default): the score is the
  null score minus the best span's score, as SQuAD v2 defines it;
- ``classifier``: a logistic regression over the signals of ``decoding.no_answer_signals``,
  fitted on held-out questions; the score is the log-odds that the question has no answer, so
  a threshold of 0 means "more likely unanswerable than not".

Choosing: both candidates are compared on the same held-out questions, the null-score gap with
its best threshold and the classifier judged on scores it did not see in fitting (K folds, each
question scored by the model fitted on the others), so its extra parameters cannot buy it an
edge; the rule with the better F1 at its best threshold wins (the gap on a tie, or when there
are too few questions of either kind to fit on). The classifier kept is then fitted on every
question, and its threshold is the best one for the out-of-fold scores.

Thresholds: the official SQuAD v2 search (``metrics.squad_v2``'s ``best_f1_thresh``) starts
from predictions already decoded with a threshold, so it can only find thresholds that abstain
more often, and it reports 0.0 when abstaining on every question scores best. Here every
question keeps its best span (``nbest[0]``), and the F1 of every threshold is counted, from
"abstain on all" to "answer all".

The rule is plain numbers (signal names, their mean and scale, weights, bias), saved with the
run and in every export, so every place that decodes answers applies the same one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from qa_finetune.calibration.logistic import FOLDS, fit_logistic, read_weights
from qa_finetune.calibration.metrics import rank_auc
from qa_finetune.decoding.no_answer import null_gap_score
from qa_finetune.decoding.no_answer_signals import SIGNALS
from qa_finetune.decoding.spans import Predictions
from qa_finetune.errors import QAFinetuneError
from qa_finetune.metrics import normalize_answer, v2_question_scores

NULL_GAP = "null_gap"
CLASSIFIER = "classifier"
KINDS = (NULL_GAP, CLASSIFIER)
RULE_FORMAT = 1


class NoAnswerRuleError(QAFinetuneError):
    """A saved no-answer rule cannot be read or applied."""


@dataclass(frozen=True)
class NoAnswerRule:
    """How a question's no-answer score is made from its signals (see the module doc)."""

    kind: str = NULL_GAP
    signals: tuple[str, ...] = ()
    mean: tuple[float, ...] = ()
    scale: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    bias: float = 0.0

    def score(self, signals: Mapping[str, np.ndarray]) -> np.ndarray:
        """The no-answer score of each question (+inf where it has no valid span: NaN signals)."""
        if self.kind == NULL_GAP:
            return null_gap_score(signals)
        columns = np.column_stack([np.asarray(signals[n], dtype=np.float64) for n in self.signals])
        standard = (columns - np.asarray(self.mean)) / np.asarray(self.scale)
        logit = standard @ np.asarray(self.weights) + self.bias
        return np.where(np.isnan(logit), np.inf, logit)

    def describe(self) -> str:
        """One line for logs and model cards."""
        if self.kind == NULL_GAP:
            return "null score minus best span score (SQuAD v2)"
        return f"logistic classifier on {', '.join(self.signals)}"

    def to_dict(self) -> dict[str, Any]:
        """The rule as JSON-ready values (``from_dict`` reads them back)."""
        values: dict[str, Any] = {"format": RULE_FORMAT, "kind": self.kind}
        if self.kind == CLASSIFIER:
            values.update(
                signals=list(self.signals),
                mean=list(self.mean),
                scale=list(self.scale),
                weights=list(self.weights),
                bias=self.bias,
            )
        return values

    @classmethod
    def from_dict(cls, values: Any, source: str) -> NoAnswerRule:
        """A rule read back; anything malformed is one ``NoAnswerRuleError`` naming ``source``."""
        if not isinstance(values, Mapping):
            raise _damaged(source, "it is not a JSON object")
        if values.get("format") != RULE_FORMAT:
            raise _damaged(source, f"format {values.get('format')!r} is not {RULE_FORMAT}")
        kind = values.get("kind")
        if kind not in KINDS:
            raise _damaged(source, f"kind {kind!r} is not one of {', '.join(KINDS)}")
        if kind == NULL_GAP:
            return cls()
        names = values.get("signals")
        if not isinstance(names, list) or not names or any(n not in SIGNALS for n in names):
            raise _damaged(source, f"'signals' must name some of {', '.join(SIGNALS)}")
        mean, scale, weights, bias = read_weights(values, len(names), partial(_damaged, source))
        return cls(kind, tuple(names), mean, scale, weights, bias)


def _damaged(source: str, why: str) -> NoAnswerRuleError:
    return NoAnswerRuleError(
        f"{source}: the no-answer rule is damaged ({why}): restore the file, or run "
        "`qa-finetune calibrate` to fit the rule again"
    )


# Fewer questions than this of either kind: the classifier is not tried.
MIN_PER_KIND = 20
MODES = ("auto", NULL_GAP, CLASSIFIER)
# Below these a threshold is still chosen, but with a warning. Measured
# (bench/reports/18-confidence.md): thresholds chosen on 200 questions drawn from SQuAD v2.0
# dev scored the F1 of one chosen on 400 at the median (10th percentile: 3.6 lower); on 100,
# 0.7 lower (4.1); on 25 the 10th percentile was 12.8 lower. The general and review sets were
# steady from 100.
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
