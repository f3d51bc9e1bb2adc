"""How far a SQuAD v2 reader's spans and its no-answer decision each carry it.

The v2 F1 mixes two skills: finding the span and knowing when there is none. Two figures
tell them apart, so a user sees which one to work on: ``HasAns_f1_answering_all``, the F1 on
answerable questions when every one of them is answered with its best span (the spans alone,
whatever the threshold), and ``no_answer_auc``, how well the null-score difference ranks the
unanswerable questions above the answerable ones (0.5 is chance, 1.0 means some threshold
decides every question right); the score is the run's no-answer rule's
(``decoding.no_answer_rule``), the null-score difference unless the run chose a classifier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from qa_finetune.decoding.spans import Predictions
from qa_finetune.metrics import normalize_answer, v2_question_scores


def answerability(
    predictions: Predictions, references: Mapping[str, Sequence[str]], spans: bool = True
) -> dict[str, float]:
    """``HasAns_f1_answering_all`` (x100, with answerable questions; ``spans=False``: not
    computed, for predictions without their n-best lists) and ``no_answer_auc`` (with both
    kinds of question); a question without a no-answer score counts as having no
    window (never answerable)."""
    odds_has: list[float] = []
    odds_none: list[float] = []
    f1s: list[float] = []
    for qid, answers in references.items():
        has_answer = any(normalize_answer(a) for a in answers)
        diff = predictions.no_answer_score.get(qid, np.inf)
        (odds_has if has_answer else odds_none).append(diff)
        if has_answer and spans:
            nbest = predictions.nbest.get(qid) or []
            span = next((entry["text"] for entry in nbest if entry["text"]), "")
            f1s.append(v2_question_scores(span, answers)[1])
    result: dict[str, float] = {}
    if f1s:
        result["HasAns_f1_answering_all"] = 100.0 * float(np.mean(f1s))
    if odds_has and odds_none:
        result["no_answer_auc"] = rank_auc(np.asarray(odds_none), np.asarray(odds_has))
    return result


def rank_auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """The chance that a random ``positive`` value is above a random ``negative`` one, ties
    counted half (the Mann-Whitney statistic, from average ranks: no pairwise table)."""
    values = np.concatenate([positive, negative])
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    # The average of the ranks (from 1) that each group of equal values occupies.
    average_rank = np.cumsum(counts) - (counts - 1) / 2
    ranks = average_rank[inverse.reshape(-1)]
    above = ranks[: len(positive)].sum() - len(positive) * (len(positive) + 1) / 2
    return float(above / (len(positive) * len(negative)))
