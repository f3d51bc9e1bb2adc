"""How far the choice among a long document's passages can go with the reader as it is: the
product's rule against other ways of choosing, and a perfect choice, on one reading.

    PYTHONPATH=$PWD .venv/bin/python bench/studies/long_document_choice.py \\
        ../shared/data/squad-v1.1-dev.json --model ../shared/models/minilm-31k \\
        --questions 300 --choose-on 300 --most 5 --passage-words 200

The long-document check's questions (``bench/long_documents.py``: ``--questions`` of the
seeded draw) and, to choose settings on, the next ``--choose-on`` questions of the same draw
(other questions of the same articles, never the check's). Each question's ``--most`` best
BM25 passages are read once, 20 candidate spans each; then, for K passages read:

- ``margin w=W``: the product's rule (``decoding.across_passages``): a passage's best span by
  its margin over "no answer" plus W x the passage's BM25 score;
- ``pooled w=W``: the same scores, but every candidate (5 a passage) of the same normalised
  answer text adds up (log-sum-exp) across passages before the best answer is taken;
- ``mixture b=B``: p(answer) = sum over passages of softmax(B x BM25) x the span's share of
  its passage's candidates and "no answer", the same answer text pooled;
- ``nearby w=2 a=A``: the product's rule plus A x the share of the question's terms (as BM25
  cuts them) found within ``NEARBY_WORDS`` words of the span (the sentence that answers a
  SQuAD question usually repeats its words);
- with ``--calibration FOLDER`` (a ``qa-finetune calibrate --output`` folder, fitted on
  questions other than these): ``confidence w=W``, each passage's best span by the logit of
  its calibrated confidence (its passage's no-answer signals and its length) plus W x BM25;
- ``perfect choice``: the best F1 among the passages' best spans (what any rule choosing a
  passage could reach), and among all their candidates.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from bench.long_documents import check_and_others, read_best_passages
from qa_finetune.calibration.confidence import Calibration, answer_features
from qa_finetune.decoding.across_passages import PassageReading
from qa_finetune.metrics import f1_score, normalize_answer, squad_v1
from qa_finetune.retrieval.bm25 import TextTokenizer
from qa_finetune.retrieval.passage_ranking import rank_passages
from qa_finetune.runs.paths import CALIBRATION_FILE

NEARBY_WORDS = 10
_WORD = re.compile(r"\w+")
_TERMS = TextTokenizer()  # the index's terms: stemmed, stop words left out

Rule = Callable[[dict[str, Any], list[Any], list[PassageReading]], str]


def best_spans(readings: Sequence[PassageReading]) -> list[PassageReading]:
    """Each passage's best candidate (readings come best first within a passage)."""
    seen: dict[int, PassageReading] = {}
    for reading in readings:
        seen.setdefault(reading.passage, reading)
    return list(seen.values())


def margin_rule(weight: float) -> Rule:
    """The product's rule: each passage's best span by its margin + ``weight`` x BM25."""

    def choose(question: dict, hits: list, readings: list[PassageReading]) -> str:
        tops = best_spans(readings)
        return max(tops, key=lambda r: (r.rank_score(weight), -r.passage)).text

    return choose


def pooled_rule(weight: float, per_passage: int = 5) -> Rule:
    """The margin rule's scores of one answer text pooled (log-sum-exp) across candidates."""

    def choose(question: dict, hits: list, readings: list[PassageReading]) -> str:
        taken: dict[int, int] = defaultdict(int)
        groups: dict[str, list[tuple[float, str]]] = defaultdict(list)
        for r in readings:
            if taken[r.passage] < per_passage:
                taken[r.passage] += 1
                groups[normalize_answer(r.text)].append((r.rank_score(weight), r.text))
        best = max(groups.values(), key=lambda g: logsumexp([s for s, _ in g]))
        return max(best)[1]

    return choose


def mixture_rule(beta: float) -> Rule:
    """p(answer) summed over passages: softmax(``beta`` x BM25) x the span's share there."""

    def choose(question: dict, hits: list, readings: list[PassageReading]) -> str:
        bm25 = np.array([h.score for h in hits], dtype=np.float64)
        prior = np.exp(beta * (bm25 - bm25.max()))
        prior /= prior.sum()
        total: dict[str, float] = defaultdict(float)
        shown: dict[str, tuple[float, str]] = {}
        for r in readings:
            key = normalize_answer(r.text)
            p = prior[r.passage] * r.passage_score
            total[key] += p
            shown[key] = max(shown.get(key, (-1.0, "")), (p, r.text))
        return shown[max(total, key=total.__getitem__)][1]

    return choose


@functools.cache
def nearby_share(question: str, passage: str, start: int, end: int) -> float:
    """The share of ``question``'s terms found within ``NEARBY_WORDS`` words of the span."""
    left = _WORD.findall(passage[:start])[-NEARBY_WORDS:]
    right = _WORD.findall(passage[end:])[:NEARBY_WORDS]
    asked, around = _TERMS.terms([question, " ".join(left + right)])
    return len(set(asked) & set(around)) / len(set(asked)) if asked else 0.0


def nearby_rule(weight: float, nearby: float) -> Rule:
    """The margin rule plus ``nearby`` x the question's terms around the span (a share)."""

    def choose(question: dict, hits: list, readings: list[PassageReading]) -> str:
        def score(r: PassageReading) -> float:
            text = hits[r.passage].passage.text
            share = nearby_share(question["question"], text, r.start, r.end)
            return r.rank_score(weight) + nearby * share

        return max(best_spans(readings), key=lambda r: (score(r), -r.passage)).text

    return choose


def confidence_rule(calibration: Any, weight: float) -> Rule:
    """Each passage's best span by its calibrated confidence's logit + ``weight`` x BM25."""

    def choose(question: dict, hits: list, readings: list[PassageReading]) -> str:
        tops = best_spans(readings)
        rows = [answer_features(r.signals, r.text, False) for r in tops]
        sure = np.clip(
            calibration.confidence(rows, [r.passage_score for r in tops]), 1e-9, 1 - 1e-9
        )
        logits = np.log(sure) - np.log1p(-sure)
        scores = [logit + weight * r.retrieval_score for logit, r in zip(logits, tops, strict=True)]
        return max(zip(scores, tops, strict=True), key=lambda x: (x[0], -x[1].passage))[1].text

    return choose


def logsumexp(values: Sequence[float]) -> float:
    """log(sum(exp(values))), without overflow."""
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def best_f1(text: str, question: dict[str, Any]) -> float:
    """``text``'s best F1 against the question's gold answers."""
    return max(f1_score(text, gold) for gold in question["answers"]["text"])


def f1_of(
    rule: Rule, questions: list[dict], found: list[list], readings: list[list], k: int
) -> float:
    """SQuAD F1 of ``rule`` choosing among each question's first ``k`` passages."""
    predictions = {}
    for q, hits, read in zip(questions, found, readings, strict=True):
        usable = [r for r in read if r.passage < k and np.isfinite(r.span_score) and r.text]
        predictions[q["id"]] = rule(q, hits[:k], usable) if usable else ""
    gold = {q["id"]: list(q["answers"]["text"]) for q in questions}
    return round(squad_v1(predictions, gold)["f1"], 2)


def perfect_f1(questions: list[dict], readings: list[list], k: int, every: bool) -> float:
    """F1 of a perfect choice among the first ``k`` passages' best spans (``every``: among
    all their candidates)."""
    total = 0.0
    for q, read in zip(questions, readings, strict=True):
        usable = [r for r in read if r.passage < k and np.isfinite(r.span_score) and r.text]
        pool = usable if every else best_spans(usable)
        total += max((best_f1(r.text, q) for r in pool), default=0.0)
    return round(100 * total / max(len(questions), 1), 2)


RULES: dict[str, Rule] = {
    **{f"margin w={w:g}": margin_rule(w) for w in (0.0, 1.0, 2.0, 4.0)},
    **{f"pooled w={w:g}": pooled_rule(w) for w in (1.0, 2.0)},
    **{f"mixture b={b:g}": mixture_rule(b) for b in (0.25, 0.5, 1.0, 2.0)},
    **{f"nearby w=2 a={a:g}": nearby_rule(2.0, a) for a in (2.0, 4.0, 8.0)},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--choose-on", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--most", type=int, default=5)
    parser.add_argument("--passage-words", type=int, default=200)
    parser.add_argument("--calibration", type=Path, help="a `qa-finetune calibrate` folder")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    rules = dict(RULES)
    if args.calibration:
        values = json.loads((args.calibration / CALIBRATION_FILE).read_text(encoding="utf-8"))
        calibration = Calibration.from_dict(values, str(args.calibration))
        for w in (0.0, 0.5, 1.0, 2.0):
            rules[f"confidence w={w:g}"] = confidence_rule(calibration, w)
    from qa_finetune.inference.answerer import QuestionAnswerer

    drawn, check_ids = check_and_others(args.data, args.questions, args.choose_on, args.seed)
    answerer = QuestionAnswerer.load(args.model)
    found, readings = read_best_passages(
        answerer, drawn, args.most, rank_passages, top_k=20, passage_words=args.passage_words
    )
    sets = {
        name: [i for i, q in enumerate(drawn) if (q["id"] in check_ids) == (name == "check")]
        for name in ("choose-on", "check")
    }
    print(machine_line())
    print(f"passages of at most {args.passage_words} words, BM25, up to {args.most} read")
    rows = []
    for k in range(1, args.most + 1):
        for name, rule in [*rules.items(), ("perfect choice", None), ("perfect, any span", None)]:
            row: dict[str, Any] = {"passages": k, "rule": name}
            for part, members in sets.items():
                qs = [drawn[i] for i in members]
                found_part = [found[i] for i in members]
                read_part = [readings[i] for i in members]
                row[part] = (
                    f1_of(rule, qs, found_part, read_part, k)
                    if rule
                    else perfect_f1(qs, read_part, k, every=name.endswith("any span"))
                )
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.output:
        payload = {"machine": machine_line(), "words": args.passage_words, "rows": rows}
        args.output.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
