"""Whether any chooser of a long document's passages could reach the target with the reader as
it is: a chooser fitted on held-out questions against the product's rule (the reader's margin
over "no answer" + 2 x BM25), and a perfect choice of passage, on one reading.

    PYTHONPATH=$PWD .venv/bin/python bench/studies/learned_chooser.py \\
        ../shared/data/squad-v1.1-dev.json --model ../shared/models/minilm-31k \\
        --questions 300 --fit-on 1700 --most 5 --cache outputs/study/chooser-readings.pkl

The long-document check's questions (``bench/long_documents.py``: ``--questions`` of the seeded
draw) and, to fit on, the next ``--fit-on`` questions of the same draw (other questions, never
the check's). Each question's ``--most`` best BM25 passages are read once, ``CANDIDATES``
candidate spans each. The chooser is a conditional logit over every candidate of the first K
passages of a question: a linear score of the candidate's features (``FEATURES``), one softmax
per question, fitted to put its weight on the candidates that score the question's best F1.

A perfect choice of passage takes the best span of the best-retrieved passage that holds a gold
answer (at its offsets), or the product's answer where no passage read holds one: what a
perfect passage ranker (a cross-encoder, say) could reach on top of the reader's spans.

Two ways of keeping the check out of the fit:
- ``other questions``: fitted on the fit-on questions (the same articles as the check);
- ``other articles``: the check's articles split in two halves; each half's questions are
  chosen by a chooser fitted on the fit-on questions of the other half's articles only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from bench.long_documents import check_and_others, read_or_reuse
from bench.studies.long_document_choice import best_f1, logsumexp, nearby_share
from qa_finetune.decoding.across_passages import PassageReading
from qa_finetune.decoding.long_context_choice import RETRIEVAL_WEIGHT as PRODUCT_WEIGHT
from qa_finetune.metrics import normalize_answer, squad_v1
from qa_finetune.retrieval.bm25 import TextTokenizer

CANDIDATES = 10  # candidate spans a passage offers the chooser
_TERMS = TextTokenizer()

FEATURES = (
    "margin",  # span score - the passage's null score: the product's reader term
    "bm25",  # the passage's BM25 score: the product's retrieval term
    "bm25 behind best",  # how far the passage's BM25 is behind the question's best passage
    "behind passage's best",  # span score - the passage's best span score (<= 0)
    "log share",  # log of the span's share among its passage's candidates and "no answer"
    "log words",  # log(1 + the answer's words)
    "answer repeats question",  # share of the answer's terms that the question uses
    "question terms nearby",  # share of the question's terms within 10 words (nearby_share)
    "other passages agreeing",  # passages (of the K) where the same answer is a candidate
    "pooled margin gain",  # log-sum-exp of the same answer's margins - its own margin
    "first passage",  # 1 for the best-retrieved passage
)


def _terms(text: str) -> set[str]:
    return set(_TERMS.terms([text])[0])


def candidate_rows(
    question: str, hits: list[Any], readings: list[PassageReading], k: int
) -> tuple[list[PassageReading], np.ndarray]:
    """The candidates of the first ``k`` passages and their ``FEATURES`` (one row each)."""
    taken: dict[int, int] = defaultdict(int)
    chosen = []
    for r in readings:
        if r.passage < k and np.isfinite(r.span_score) and r.text and taken[r.passage] < CANDIDATES:
            taken[r.passage] += 1
            chosen.append(r)
    if not chosen:
        return [], np.zeros((0, len(FEATURES)))
    asked = _terms(question)
    best_bm25 = max(h.score for h in hits[:k])
    best_in_passage: dict[int, float] = {}
    by_answer: dict[str, list[PassageReading]] = defaultdict(list)
    for r in chosen:
        best_in_passage.setdefault(r.passage, r.span_score)
        by_answer[normalize_answer(r.text)].append(r)
    rows = []
    for r in chosen:
        margin = r.span_score - r.null_score
        same = by_answer[normalize_answer(r.text)]
        pooled = logsumexp([s.span_score - s.null_score for s in same])
        answer_terms = _terms(r.text)
        text = hits[r.passage].passage.text
        rows.append(
            [
                margin,
                r.retrieval_score,
                r.retrieval_score - best_bm25,
                r.span_score - best_in_passage[r.passage],
                math.log(max(r.passage_score, 1e-12)),
                math.log1p(len(r.text.split())),
                len(answer_terms & asked) / len(answer_terms) if answer_terms else 0.0,
                nearby_share(question, text, r.start, r.end),
                len({s.passage for s in same}) - 1,
                pooled - margin,
                float(r.passage == 0),
            ]
        )
    return chosen, np.array(rows, dtype=np.float64)


class Chooser:
    """A conditional logit over a question's candidates, fitted with Adam on standardised
    features (L2 on the weights)."""

    def __init__(self, l2: float = 1e-3, steps: int = 600, rate: float = 0.05) -> None:
        self.l2, self.steps, self.rate = l2, steps, rate
        self.mean = self.scale = self.weights = None

    def fit(self, groups: list[np.ndarray], targets: list[np.ndarray]) -> Chooser:
        """``groups``: each question's feature rows; ``targets``: each a distribution over them."""
        stacked = np.vstack(groups)
        self.mean, self.scale = stacked.mean(0), stacked.std(0) + 1e-9
        # One padded block: questions x their most candidates x features; padding masked out.
        most = max(len(g) for g in groups)
        x = np.zeros((len(groups), most, stacked.shape[1]))
        t = np.zeros((len(groups), most))
        taken = np.zeros((len(groups), most), dtype=bool)
        for i, (g, target) in enumerate(zip(groups, targets, strict=True)):
            x[i, : len(g)] = (g - self.mean) / self.scale
            t[i, : len(g)] = target
            taken[i, : len(g)] = True
        w = np.zeros(stacked.shape[1])
        w[0] = 1.0  # start at the reader's margin alone
        m, v = np.zeros_like(w), np.zeros_like(w)
        for step in range(1, self.steps + 1):
            s = np.where(taken, x @ w, -np.inf)
            p = np.exp(s - s.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            grad = self.l2 * w + np.einsum("qc,qcf->f", p - t, x) / len(groups)
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad**2
            w -= self.rate * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
        self.weights = w
        return self

    def scores(self, rows: np.ndarray) -> np.ndarray:
        """Each candidate's score (higher is better)."""
        return ((rows - self.mean) / self.scale) @ self.weights


def training_target(question: dict, chosen: list[PassageReading]) -> np.ndarray | None:
    """Uniform over the candidates with the question's best F1; None when none scores."""
    f1 = np.array([best_f1(r.text, question) for r in chosen])
    if not len(f1) or f1.max() <= 0:
        return None
    hit = (f1 == f1.max()).astype(np.float64)
    return hit / hit.sum()


def fit_chooser(items: list[Question]) -> Chooser:
    """A chooser fitted on ``items`` (questions no candidate answers at all left out)."""
    groups, targets = [], []
    for item in items:
        target = training_target(item.question, item.candidates)
        if target is not None:
            groups.append(item.rows)
            targets.append(target)
    return Chooser().fit(groups, targets)


@dataclass(frozen=True)
class Question:
    """One question's reading of its first K passages, as every way of choosing sees it."""

    question: dict[str, Any]
    hits: list[Any]  # its passages, best retrieved first
    candidates: list[PassageReading]
    rows: np.ndarray  # the candidates' FEATURES


def choose(item: Question, scores: np.ndarray) -> str:
    """The candidate scoring highest (the earlier passage among equals); "" with none."""
    if not item.candidates:
        return ""
    best = max(range(len(item.candidates)), key=lambda i: (scores[i], -item.candidates[i].passage))
    return item.candidates[best].text


def product_scores(rows: np.ndarray) -> np.ndarray:
    """The product's rule on the same candidates: margin + 2 x BM25 (its best span wins)."""
    return rows[:, 0] + PRODUCT_WEIGHT * rows[:, 1]


def holds_answer(question: dict[str, Any], hit: Any) -> bool:
    """Whether a gold answer lies inside the passage ``hit`` (offsets in the whole article)."""
    answers = question["answers"]
    return any(
        hit.passage.start <= start and start + len(text) <= hit.passage.end
        for text, start in zip(answers["text"], answers["answer_start"], strict=True)
    )


def perfect_passage(item: Question) -> str:
    """The best span of the best-retrieved passage read that holds a gold answer; the product's
    answer where none does."""
    place = first_holding(item)
    if place is None:
        return choose(item, product_scores(item.rows))
    # Each passage's candidates come best first.
    return next(r.text for r in item.candidates if r.passage == place)


def first_holding(item: Question) -> int | None:
    """The best-retrieved passage read that holds a gold answer; None when none does."""
    places = sorted({r.passage for r in item.candidates})
    return next((p for p in places if holds_answer(item.question, item.hits[p])), None)


def chosen_by(chooser_of: Callable[[Question], Chooser]) -> Callable[[Question], str]:
    """Answering by the chooser ``chooser_of`` gives for each question."""
    return lambda item: choose(item, chooser_of(item).scores(item.rows))


def f1_of(items: list[Question], answer: Callable[[Question], str]) -> float:
    """SQuAD F1 of ``answer`` over ``items``."""
    predictions = {item.question["id"]: answer(item) for item in items}
    gold = {item.question["id"]: list(item.question["answers"]["text"]) for item in items}
    return round(squad_v1(predictions, gold)["f1"], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--fit-on", type=int, default=1700)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--most", type=int, default=5)
    parser.add_argument("--cache", type=Path, help="keep the reading here, and reuse it")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    drawn, check_ids = check_and_others(args.data, args.questions, args.fit_on, args.seed)
    key = [str(args.data), args.model, args.questions, args.fit_on, args.seed]
    found, readings = read_or_reuse(args.model, drawn, args.most, CANDIDATES, args.cache, key)
    # The check's articles in two halves, for the chooser fitted on other articles only.
    check_titles = sorted({q["title"] for q in drawn if q["id"] in check_ids})
    half = {title: i % 2 for i, title in enumerate(check_titles)}
    print(machine_line())
    rows_out = []
    for k in range(1, args.most + 1):
        items = [
            Question(q, hits, *candidate_rows(q["question"], hits, read, k))
            for q, hits, read in zip(drawn, found, readings, strict=True)
        ]
        check = [it for it in items if it.question["id"] in check_ids]
        fit_on = [it for it in items if it.question["id"] not in check_ids]
        chooser = fit_chooser(fit_on)
        halves = [
            fit_chooser([it for it in fit_on if half.get(it.question["title"]) != h])
            for h in (0, 1)
        ]
        row: dict[str, Any] = {"passages": k}
        for name, part in (("check", check), ("fit-on", fit_on)):
            row[f"product, {name}"] = f1_of(part, lambda it: choose(it, product_scores(it.rows)))
            row[f"chooser, {name}"] = f1_of(part, chosen_by(lambda _, c=chooser: c))
            row[f"perfect passage, {name}"] = f1_of(part, perfect_passage)
            row[f"a passage read holds an answer, {name}"] = round(
                100 * sum(first_holding(it) is not None for it in part) / len(part), 2
            )
        row["chooser fitted on other articles, check"] = f1_of(
            check,
            chosen_by(lambda it, hs=halves: hs[half[it.question["title"]]]),
        )
        row["weights"] = dict(zip(FEATURES, np.round(chooser.weights, 3).tolist(), strict=True))
        rows_out.append(row)
        print(json.dumps(row), flush=True)
    if args.output:
        payload = {"machine": machine_line(), "rows": rows_out}
        args.output.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
