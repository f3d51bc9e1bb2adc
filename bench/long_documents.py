"""The long-document check: SQuAD v1.1 dev questions asked of their whole article.

    PYTHONPATH=$PWD .venv/bin/python bench/long_documents.py ../shared/data/squad-v1.1-dev.json \\
        --model ../shared/models/minilm-31k --questions 300 --seed 0 \\
        --read bm25:3 --read paragraph --read passages:5 --output /tmp/long-documents.json

Each question's article is its paragraphs joined by a blank line, answer offsets moved and
checked (``data.whole_documents``); ``--questions`` of them are drawn (seeded). Each
``--read`` answers them all one way: ``read-all`` (every window of the article, as before
long contexts were narrowed), ``paragraph`` (the question's own paragraph: the ceiling),
``bm25:K`` (the K best passages of the article by BM25, read as ``ask`` reads them,
``retrieval.long_contexts``; with ``@W`` appended, only articles over W words are narrowed),
``dense:K`` and ``hybrid:K`` (the same, ranked by the default sentence encoder's cosine, or
BM25 plus it, as ``index --retriever`` does), or ``passages:K[:RETRIEVER]`` (the K best
passages read once, the answer chosen across the first 1..K
with each weight of ``WEIGHTS``: a grid from one reading). Prints and writes EM/F1, how often
a passage read held a gold answer, the windows read per question, and the seconds; every
answer's offsets are checked against the whole article.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench._machine import machine_line
from qa_finetune.config import DataConfig
from qa_finetune.data.records import read_records
from qa_finetune.data.validation import SplitReport, validate_records
from qa_finetune.data.whole_documents import eligible_questions, whole_document_questions
from qa_finetune.metrics import squad_v1
from qa_finetune.retrieval.long_contexts import DEFAULT_THRESHOLD_WORDS, LongContexts
from qa_finetune.retrieval.passage_ranking import EncodedRanking, rank_passages
from qa_finetune.retrieval.passages import DEFAULT_MAX_WORDS, split_passages

CHUNK = 25  # questions answered per call, so progress shows on a slow machine


def long_document_questions(data: Path, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` questions of ``data`` (seeded), each asked of its whole article."""
    return _drawn(_records(data), count, seed)


def check_and_others(
    data: Path, questions: int, others: int, seed: int
) -> tuple[list[dict[str, Any]], set[str]]:
    """The check's ``questions`` and the next ``others`` of the same seeded draw (other
    questions of the same articles, to choose or fit on), and the ids of the check's."""
    records = _records(data)  # read and checked once for both draws
    drawn = _drawn(records, questions + others, seed)
    return drawn, {q["id"] for q in _drawn(records, questions, seed)}


def _records(data: Path) -> list[dict[str, Any]]:
    return validate_records(read_records(data, DataConfig()), False, SplitReport())


def _drawn(records: list[dict[str, Any]], count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` of the questions that can be asked of their whole article, seeded: the
    same ``count`` questions for the same seed, whatever else is drawn."""
    return whole_document_questions(records, count / len(eligible_questions(records)), seed)


RETRIEVERS = ("bm25", "dense", "hybrid")


def retriever_of(way: str) -> str | None:
    """The retriever a ``--read`` value ranks passages with; None where it ranks none."""
    if way in ("paragraph", "read-all"):
        return None
    parts = way.split(":")
    name = (parts[2] if len(parts) == 3 else "bm25") if parts[0] == "passages" else parts[0]
    if name not in RETRIEVERS or len(parts) < 2:
        raise SystemExit(
            f"unknown --read {way!r}: read-all, paragraph, passages:K[:RETRIEVER] or "
            "RETRIEVER:K[@WORDS] (RETRIEVER: bm25, dense or hybrid)"
        )
    return name


def ranker(retriever: str, encoder: Any) -> Any:
    """How ``retriever`` ranks a document's passages (``encoder``: for dense and hybrid)."""
    if retriever == "bm25":
        return rank_passages
    return EncodedRanking(encoder, hybrid=retriever == "hybrid")


def reading(way: str, encoder: Any = None) -> LongContexts | None:
    """The long-context setting of a ``--read`` value; None for ``paragraph`` and the grid."""
    retriever = retriever_of(way)
    if way == "read-all":
        return LongContexts(read_all=True)
    if retriever is None or way.startswith("passages:"):
        return None
    top, _, words = way.partition(":")[2].partition("@")
    threshold = int(words) if words else DEFAULT_THRESHOLD_WORDS
    return LongContexts(
        threshold_words=threshold, top_passages=int(top), rank=ranker(retriever, encoder)
    )


def answer_all(
    answerer: Any, questions: list[dict[str, Any]], way: str, encoder: Any = None
) -> dict[str, Any]:
    """Scores, passage recall and windows read for one way of reading, as ``ask`` reads."""
    from qa_finetune.inference.passage_choice import answers_of, reading_of

    setting = reading(way, encoder)
    answerer.long_contexts = setting or LongContexts(read_all=True)
    started = time.perf_counter()
    predictions: dict[str, str] = {}
    held = windows = 0
    for first in range(0, len(questions), CHUNK):
        chunk = questions[first : first + CHUNK]
        pairs = [(q["question"], _paragraph(q) if setting is None else q["context"]) for q in chunk]
        read = reading_of(answerer, pairs)
        windows += len(read.windows.encoding["input_ids"])
        start, end = answerer.predict_windows(read.windows.encoding)
        answers = answers_of(answerer, read, start, end)
        for record, pair, n, ranked in zip(chunk, pairs, read.narrowed, answers, strict=True):
            best = ranked[0]
            assert pair[1][best["start"] : best["end"]] == best["answer"], record["id"]
            predictions[record["id"]] = best["answer"]
            held += _holds_answer(record, n) if setting is not None else 1
        done = min(first + CHUNK, len(questions))
        print(f"  {way}: {done}/{len(questions)} questions", file=sys.stderr, flush=True)
    gold = {q["id"]: list(q["answers"]["text"]) for q in questions}
    scores = squad_v1(predictions, gold)
    return {
        "read": way,
        "exact_match": round(scores["exact_match"], 2),
        "f1": round(scores["f1"], 2),
        "answer_read": round(100 * held / len(questions), 2),
        "windows_per_question": round(windows / len(questions), 2),
        "seconds": round(time.perf_counter() - started, 1),
    }


WEIGHTS = (0.0, 1.0, 2.0, 4.0)


def read_best_passages(
    answerer: Any,
    questions: list[dict[str, Any]],
    most: int,
    rank: Any,
    top_k: int = 1,
    passage_words: int = DEFAULT_MAX_WORDS,
) -> tuple[list[list[Any]], list[list[Any]]]:
    """Each question's ``most`` best passages of its article (cut at ``passage_words`` words,
    ranked by ``rank``) as search hits, and the reader's ``top_k`` candidate spans of each
    (``decoding.across_passages.PassageReading``), every passage read on its own."""
    from qa_finetune.inference.open_answers import read_passages
    from qa_finetune.retrieval.retriever import Hit, Passage

    found, readings = [], []
    for first in range(0, len(questions), CHUNK):
        chunk = questions[first : first + CHUNK]
        hits = []
        for q in chunk:
            spans = split_passages(q["context"], passage_words)
            ranked = rank(q["question"], [q["context"][a:b] for a, b in spans])[:most]
            hits.append(
                [
                    Hit(Passage(n, "", *spans[n], q["context"][slice(*spans[n])]), score, place)
                    for place, (n, score) in enumerate(ranked, 1)
                ]
            )
        found.extend(hits)
        readings.extend(read_passages(answerer, [q["question"] for q in chunk], hits, top_k))
        done = min(first + CHUNK, len(questions))
        print(f"  {most} passages: {done}/{len(questions)} questions", file=sys.stderr, flush=True)
    return found, readings


def read_or_reuse(
    model: str,
    questions: list[dict[str, Any]],
    most: int,
    top_k: int,
    cache: Path | None,
    key: list[Any],
) -> tuple[list[list[Any]], list[list[Any]]]:
    """``read_best_passages`` (BM25, ``most`` passages, ``top_k`` candidates each) by
    ``model``, kept in ``cache`` and read back from it when it was made for the same ``key``
    (what the questions were drawn with) and reading; a cache made otherwise is refused."""
    import pickle

    key = [*key, most, top_k]
    if cache is not None and cache.exists():
        cached = pickle.loads(cache.read_bytes())
        if cached["key"] != key:
            raise SystemExit(f"{cache} holds the reading of {cached['key']}, not {key}")
        return cached["found"], cached["readings"]
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(model)
    found, readings = read_best_passages(answerer, questions, most, rank_passages, top_k=top_k)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(pickle.dumps({"key": key, "found": found, "readings": readings}))
    return found, readings


def passages_grid(
    answerer: Any, questions: list[dict[str, Any]], way: str, encoder: Any = None
) -> list[dict]:
    """Each question's ``most`` best passages (``way``'s retriever, BM25 unless named) read
    one by one, then the answer chosen across the first K of them (K up to ``most``) by the
    reader's margin over "no answer" plus w x the passage's retrieval score
    (``decoding.across_passages``), for each w of ``WEIGHTS``: one reading gives the grid."""
    from qa_finetune.decoding.across_passages import choose_across_passages

    most = int(way.split(":")[1])
    started = time.perf_counter()
    found, readings = read_best_passages(
        answerer, questions, most, ranker(retriever_of(way) or "bm25", encoder)
    )
    seconds = time.perf_counter() - started
    gold = {q["id"]: list(q["answers"]["text"]) for q in questions}
    rows = []
    for k in range(1, most + 1):
        held = sum(
            _holds_in(q, [h.passage for h in hits[:k]])
            for q, hits in zip(questions, found, strict=True)
        )
        for weight in WEIGHTS:
            predictions = {}
            for q, hits, read in zip(questions, found, readings, strict=True):
                chosen = choose_across_passages(
                    [r for r in read if r.passage < k], 0.0, False, retrieval_weight=weight
                )
                if not chosen:
                    predictions[q["id"]] = ""
                    continue
                best = chosen[0][0]
                start = hits[best.passage].passage.start + best.start
                end = hits[best.passage].passage.start + best.end
                assert q["context"][start:end] == best.text, q["id"]
                predictions[q["id"]] = best.text
            scores = squad_v1(predictions, gold)
            rows.append(
                {
                    "read": ":".join(["passages", str(k), *way.split(":")[2:]]) + f" w={weight:g}",
                    "exact_match": round(scores["exact_match"], 2),
                    "f1": round(scores["f1"], 2),
                    "answer_read": round(100 * held / len(questions), 2),
                    "windows_per_question": None,
                    "seconds": round(seconds, 1) if k == most else None,
                }
            )
    return rows


def _holds_in(question: dict[str, Any], passages: list[Any]) -> bool:
    answers = list(
        zip(question["answers"]["answer_start"], question["answers"]["text"], strict=True)
    )
    return any(p.start <= a and a + len(t) <= p.end for p in passages for a, t in answers)


def _paragraph(question: dict[str, Any]) -> str:
    return question["paragraph"]


def _holds_answer(question: dict[str, Any], narrowed: Any) -> bool:
    """Whether a gold answer lies whole inside a passage that was read."""
    if narrowed is None:
        return True
    spans = zip(narrowed.original_starts, narrowed.lengths, strict=True)
    answers = zip(question["answers"]["answer_start"], question["answers"]["text"], strict=True)
    pairs = [(a, len(t)) for a, t in answers]
    return any(s <= a and a + n <= s + length for s, length in spans for a, n in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--read", action="append", required=True)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    retrievers = {retriever_of(way) for way in args.read}  # a bad value fails before loading
    from qa_finetune.inference.answerer import QuestionAnswerer

    paragraphs = {
        r["id"]: r["context"]
        for r in validate_records(read_records(args.data, DataConfig()), False, SplitReport())
    }
    questions = long_document_questions(args.data, args.questions, args.seed)
    for question in questions:
        question["paragraph"] = paragraphs[question["id"].removesuffix("#document")]
    words = sorted(len(q["context"].split()) for q in questions)
    print(machine_line())
    print(
        f"{len(questions)} questions of {len({q['title'] for q in questions})} articles, "
        f"words per article: median {words[len(words) // 2]}, min {words[0]}, max {words[-1]}"
    )
    answerer = QuestionAnswerer.load(args.model)
    encoder = None
    if retrievers & {"dense", "hybrid"}:
        from qa_finetune.modeling.sentence_encoder import SentenceEncoder

        encoder = SentenceEncoder.load()
    rows = []
    for way in args.read:
        if way.startswith("passages:"):
            for row in passages_grid(answerer, questions, way, encoder):
                rows.append(row)
                print(json.dumps(row), flush=True)
            continue
        row = answer_all(answerer, questions, way, encoder)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.output:
        payload = {"machine": machine_line(), "questions": len(questions), "rows": rows}
        args.output.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
