"""A SQuAD file's contexts as documents: named by file and title, each text once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qa_finetune.documents.problems import DocumentReadError
from qa_finetune.documents.squad_contexts import squad_contexts, squad_paragraphs


def _squad(path: Path, articles: list[dict]) -> Path:
    path.write_text(json.dumps({"version": "v2.0", "data": articles}), encoding="utf-8")
    return path


def test_contexts_are_named_by_file_and_title_once_each(tmp_path: Path) -> None:
    qa = {"id": "1", "question": "Q?", "answers": [{"text": "Paris", "answer_start": 0}]}
    path = _squad(
        tmp_path / "train.json",
        [
            {"title": "France", "paragraphs": [{"context": "Paris is in France.", "qas": [qa]}]},
            {
                "title": "Café",
                "paragraphs": [
                    {"context": "東京 🙂\r\nline", "qas": []},
                    {"context": "Paris is in France.", "qas": []},  # met before: kept once
                    {"context": "  ", "qas": []},  # nothing to find in it
                    {"context": "Third."},
                ],
            },
            {"paragraphs": [{"context": "Untitled.", "qas": []}]},
        ],
    )
    assert squad_contexts(path) == [
        (f"{path}#France", "Paris is in France."),
        (f"{path}#Café#1", "東京 🙂\r\nline"),
        (f"{path}#Café#4", "Third."),
        (f"{path}#article 3", "Untitled."),
    ]
    first = squad_paragraphs(path)[0]
    assert (first.key, first.title, first.qas, first.where) == (
        "France",
        "France",
        [qa],
        f"{path}: article 1",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "not SQuAD JSON (an object whose 'data' is a list of articles)"),
        ("{oops", "not SQuAD JSON (an object whose 'data' is a list of articles)"),
        ('{"data": [{"title": "T"}]}', "article 1 is not SQuAD (paragraphs of context and qas)"),
        (
            '{"data": [{"paragraphs": [{"context": null}]}]}',
            "article 1: the context of 'article 1' is null, not text: fix the SQuAD file",
        ),
    ],
)
def test_a_file_that_is_not_squad_is_refused_in_one_line(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DocumentReadError) as refused:
        squad_contexts(path)
    assert str(refused.value) == f"{path}: {message}"
