"""SQuAD v1.1 and v2.0 scoring, following the definitions of the official evaluation scripts.

v1.1: answers are normalised (lower case, ASCII punctuation removed, articles dropped, white
space folded); exact match and bag-of-tokens F1 take the maximum over the gold answers and are
averaged over all questions, x100. A question without a prediction scores 0 and is counted.

v2.0 differs where the official v2 script differs: an empty gold list means the only right
answer is "", gold answers that normalise to nothing are ignored, and F1 of two empty answers
is 1 (v1.1 gives 0). Scores are reported overall and split into HasAns / NoAns questions; given
null-score differences, the best no-answer threshold is searched as the official script does.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence

# Only ASCII punctuation, as in the official script: “curly quotes” and dashes (—) remain.
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_WH_WORDS = {
    "what": "what",
    "who": "who",
    "whom": "who",
    "whose": "who",
    "when": "when",
    "where": "where",
    "why": "why",
    "how": "how",
    "which": "which",
}
_WORD = re.compile(r"[a-z]+")


def normalize_answer(s: str) -> str:
    """Lower case, drop ASCII punctuation, drop the articles a/an/the, fold white space."""
    text = s.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_score(prediction: str, ground_truth: str) -> bool:
    """Whether the two answers are equal after normalisation."""
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def f1_score(prediction: str, ground_truth: str) -> float:
    """SQuAD v1.1 bag-of-tokens F1 of the normalised answers; 0 when no token is shared."""
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def squad_v1(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> dict:
    """Official SQuAD v1.1 ``exact_match`` and ``f1`` (x100) plus ``total`` and ``missing``."""
    exact = f1 = 0.0
    missing = 0
    for qid, golds in references.items():
        if qid not in predictions:
            missing += 1
            continue
        prediction = predictions[qid]
        exact += max((float(exact_match_score(prediction, g)) for g in golds), default=0.0)
        f1 += max((f1_score(prediction, g) for g in golds), default=0.0)
    total = len(references)
    return {
        "exact_match": _percent(exact, total),
        "f1": _percent(f1, total),
        "total": total,
        "missing": missing,
    }


def squad_v2(
    predictions: Mapping[str, str],
    references: Mapping[str, Sequence[str]],
    null_score_diff: Mapping[str, float] | None = None,
) -> dict:
    """Official SQuAD v2.0 scores; an empty gold list marks an unanswerable question.

    ``exact``/``f1`` score the predictions as given (postprocessing already applied its
    no-answer threshold). With ``null_score_diff`` (higher = more likely unanswerable) the
    official search adds ``best_exact``/``best_f1`` and the thresholds that reach them. A
    question without a prediction scores 0 and is counted in ``total`` and ``missing``.
    """
    exact: dict[str, float] = {}
    f1: dict[str, float] = {}
    has_answer: dict[str, bool] = {}
    for qid, answers in references.items():
        has_answer[qid] = bool(answers)
        if qid not in predictions:
            exact[qid] = f1[qid] = 0.0
            continue
        exact[qid], f1[qid] = v2_question_scores(predictions[qid], answers)

    has_ans = [q for q in references if has_answer[q]]
    no_ans = [q for q in references if not has_answer[q]]
    out: dict = {
        "exact": _percent(sum(exact.values()), len(exact)),
        "f1": _percent(sum(f1.values()), len(f1)),
        "total": len(exact),
        "missing": sum(1 for q in references if q not in predictions),
    }
    for name, qids in (("HasAns", has_ans), ("NoAns", no_ans)):
        out[f"{name}_exact"] = _percent(sum(exact[q] for q in qids), len(qids))
        out[f"{name}_f1"] = _percent(sum(f1[q] for q in qids), len(qids))
        out[f"{name}_total"] = len(qids)
    if null_score_diff is not None:
        for name, scores in (("exact", exact), ("f1", f1)):
            best, threshold = _best_threshold(predictions, scores, null_score_diff, has_answer)
            out[f"best_{name}"] = best
            out[f"best_{name}_thresh"] = threshold
    return out


def v2_question_scores(prediction: str, answers: Sequence[str]) -> tuple[float, float]:
    """Exact match and F1 (0..1) of one SQuAD v2 prediction against its gold answers."""
    golds = [a for a in answers if normalize_answer(a)] or [""]
    exact = max(float(_v2_exact(g, prediction)) for g in golds)
    return exact, max(_v2_f1(g, prediction) for g in golds)


def question_type(question: str) -> str:
    """The first wh-word of the question: what/who/when/where/why/how/which, else "other".

    "how many"/"how much" count as "how"; "whom"/"whose" as "who".
    """
    for word in _WORD.findall(question.lower()):
        if word in _WH_WORDS:
            return _WH_WORDS[word]
    return "other"


def _token_f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    common = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(prediction_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _v2_tokens(s: str) -> list[str]:
    return normalize_answer(s).split() if s else []


def _v2_exact(gold: str, prediction: str) -> bool:
    return normalize_answer(gold) == normalize_answer(prediction)


def _v2_f1(gold: str, prediction: str) -> float:
    gold_tokens, prediction_tokens = _v2_tokens(gold), _v2_tokens(prediction)
    # v2: an empty answer is right exactly when the other one is empty too.
    if not gold_tokens or not prediction_tokens:
        return float(gold_tokens == prediction_tokens)
    return _token_f1(prediction_tokens, gold_tokens)


def _best_threshold(
    predictions: Mapping[str, str],
    scores: Mapping[str, float],
    null_score_diff: Mapping[str, float],
    has_answer: Mapping[str, bool],
) -> tuple[float, float]:
    """The official v2 search: answer "" when diff > threshold; best score (x100), threshold.

    Starting from "every question answered ''" (right for each NoAns question), questions are
    switched to their predicted answer in increasing order of their null-score difference.
    """
    # A question without a prediction stays wrong at every threshold.
    score = best = float(sum(1 for q in scores if not has_answer[q] and q in predictions))
    threshold = 0.0
    # A question without a difference is never switched: as if its difference were +inf.
    ordered = sorted((q for q in scores if q in null_score_diff), key=null_score_diff.__getitem__)
    for qid in ordered:
        if has_answer[qid]:
            score += scores[qid]
        elif predictions.get(qid):
            # A non-empty answer to an unanswerable question turns a right "" into a wrong one.
            score -= 1
        if score > best:
            best, threshold = score, float(null_score_diff[qid])
    return _percent(best, len(scores)), threshold


def _percent(total: float, count: int) -> float:
    return 100.0 * total / count if count else 0.0
