"""``evaluate --open``: recall against a brute-force BM25 ranking, and end-to-end answers that
equal the gold-paragraph answers when retrieval puts the gold paragraph first."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_retrieval_bm25 import brute_force
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.evaluation.open_evaluation import collection_of, retrieval_recall, spread_sample

PARAGRAPHS = {
    "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931.": [
        ("Who designed the Verrin Bay Bridge?", "Alma Stroud"),
        ("When did the Verrin Bay Bridge open?", "1931"),
    ],
    "Quokkas are small marsupials that live on Rottnest Island near Perth.": [
        ("Where do quokkas live?", "Rottnest Island"),
    ],
    "The Corrin Telegraph Company was founded in 1871 by Edith Marr.": [
        ("Who founded the Corrin Telegraph Company?", "Edith Marr"),
    ],
    "Granite is an igneous rock; the bridge's arches are grey granite from Verrin quarries.": [
        ("What rock are the arches made of?", "grey granite"),
    ],
    "Perth is the capital of Western Australia and lies on the Swan River.": [
        ("Which river does Perth lie on?", "Swan River"),
    ],
}


def records() -> list[dict]:
    out = []
    for number, (context, qas) in enumerate(PARAGRAPHS.items()):
        for i, (question, answer) in enumerate(qas):
            start = context.index(answer)
            out.append(
                {
                    "id": f"q{number}-{i}",
                    "title": "Verrin",
                    "context": context,
                    "question": question,
                    "answers": {"text": [answer], "answer_start": [start]},
                }
            )
    return out


def test_recall_equals_a_brute_force_ranking() -> None:
    questions = records()
    index, numbers = collection_of(questions)
    recall, found = retrieval_recall(index, questions, numbers, 20)
    terms = index.tokenizer.terms(index.texts)
    expected_hits = {1: 0, 5: 0, 20: 0}
    for question, ranked in zip(questions, found, strict=True):
        scores = brute_force(terms, index.tokenizer.terms([question["question"]])[0])
        order = [i for i in np.lexsort((np.arange(len(scores)), -scores)) if scores[i] > 0]
        assert [h.passage.number for h in ranked] == order[:20]
        for k in expected_hits:
            expected_hits[k] += numbers[question["context"]] in order[:k]
    assert recall == {f"recall@{k}": 100.0 * n / len(questions) for k, n in expected_hits.items()}


def test_a_sample_is_spread_over_the_file() -> None:
    items = [{"id": str(i)} for i in range(10)]
    assert [r["id"] for r in spread_sample(items, 4)] == ["0", "3", "6", "9"]
    assert spread_sample(items, None) == items == spread_sample(items, 50)


def squad_file(path: Path) -> Path:
    paragraphs = [
        {
            "context": context,
            "qas": [
                {
                    "id": f"q{n}-{i}",
                    "question": q,
                    "answers": [{"text": a, "answer_start": context.index(a)}],
                }
                for i, (q, a) in enumerate(qas)
            ],
        }
        for n, (context, qas) in enumerate(PARAGRAPHS.items())
    ]
    path.write_text(json.dumps({"data": [{"title": "Verrin", "paragraphs": paragraphs}]}))
    return path


def test_open_answers_equal_gold_answers_when_the_gold_paragraph_is_read(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    data = squad_file(tmp_path / "dev.json")
    report = tmp_path / "report"
    args = ["evaluate", "--model", str(tiny_model_dir), "--data", str(data), "--open"]
    args += ["--top-passages", "1", "--report-dir", str(report), "--allow-untrained-head"]
    result = CliRunner().invoke(app, [*args, "--retriever", "bm25"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((report / "metrics.json").read_text())
    assert metrics["recall@1"] == 100.0 and metrics["passages"] == len(PARAGRAPHS)
    gold = json.loads((report / "predictions.json").read_text())
    opened = json.loads((report / "open_predictions.json").read_text())
    assert opened == gold and len(gold) == 6
    assert (metrics["open_exact_match"], metrics["open_f1"]) == (
        metrics["exact_match"],
        metrics["f1"],
    )
    assert "retrieval recall@1 / @5 / @20" in result.output


def test_open_needs_a_local_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["evaluate", "--dataset", "squad", "--open"])
    assert result.exit_code == 1
    assert "--open searches the contexts of a local --data file" in result.output


def test_every_retriever_side_by_side_hybrid_first(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the contexts' vectors
    data = squad_file(tmp_path / "dev.json")
    report = tmp_path / "report"
    args = ["evaluate", "--model", str(tiny_model_dir), "--data", str(data), "--open"]
    args += ["--report-dir", str(report), "--allow-untrained-head"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    metrics = json.loads((report / "metrics.json").read_text())
    assert list(metrics["retrievers"]) == ["bm25", "dense", "hybrid"]
    assert metrics["retriever"] == "hybrid"
    for name, figures in metrics["retrievers"].items():
        assert {"recall@1", "recall@5", "recall@20", "open_exact_match", "open_f1"} <= set(
            figures
        ), name
        # Five paragraphs: every search holds the gold paragraph among its first five.
        assert figures["recall@5"] == 100.0, name
    assert metrics["recall@1"] == metrics["retrievers"]["hybrid"]["recall@1"]
    assert metrics["open_f1"] == metrics["retrievers"]["hybrid"]["open_f1"]
    assert len(list((tmp_path / "cache" / "qa-finetune" / "embeddings").glob("*.npy"))) == 1
    lines = result.output.splitlines()
    for name in ("bm25", "dense", "hybrid"):
        assert any(line.startswith(f"{name}: recall@1 / @5 / @20, open EM / F1") for line in lines)


def test_retriever_needs_open_and_a_known_name(tmp_path: Path) -> None:
    data = squad_file(tmp_path / "dev.json")
    result = CliRunner().invoke(app, ["evaluate", "--data", str(data), "--retriever", "dense"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "error: --retriever dense sets how --open searches: add --open, or drop --retriever"
    )
    result = CliRunner().invoke(app, ["evaluate", "--data", str(data), "--retriever", "tfidf"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "error: --retriever 'tfidf' is not a retriever: use bm25, dense or hybrid"
    )
