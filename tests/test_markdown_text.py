"""Markdown read as text: markup as spaces, every other character at its offset in the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.documents.markdown_text import markdown_to_text
from qa_finetune.retrieval.building import IndexSettings, build_index

RECYCLING = (
    "---\ntitle: Recycling\n---\n"
    "# Recycling in *Lenholm*\n\n"
    "The **depot** on [Quay Street](https://example.org/quay_(east)) takes glass. "
    "![a bin](bin.png)\n\n"
    "> Paper goes in the `blue` bin.\n\n"
    "1. Rinse the jars\n- [x] Remove the lids\n\n"
    "```sh\nsort --glass *.jar\n```\n\n"
    "| item | bin |\n|------|:---:|\n| cans | grey |\n\n"
    "Setext title\n============\n\n"
    "snake_case stays, 2*3*4 stays, \\*escaped\\* stays <br> ~~old~~ __new__\r\n"
    "[ref]: https://example.org\n"
)


@pytest.mark.parametrize(
    ("markdown", "text"),
    [
        ("# Recycling\n\nGlass.", "  Recycling\n\nGlass."),
        ("## Bins ##\n", "   Bins   \n"),
        ("Some **bold** and _it_ text", "Some   bold   and  it  text"),
        ("[Quay](http://x.org/a_(b)) ok", " Quay                      ok"),
        ("see ![bin](b.png) here", "see               here"),
        ("`code *x*`", " code *x* "),
        ("> - item", "    item"),
        ("```py\nx = *1*\n```", "     \nx = *1*\n   "),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "  a   b  \n         \n  1   2  "),
        ("snake_case 2*3*4 \\*x\\*", "snake_case 2*3*4  *x *"),
        ("a <b>tag</b> <!-- note -->", "a    tag     " + " " * len("<!-- note -->")),
        ("Title\r\n=====\r\n", "Title\r\n     \r\n"),
        ("***\n---\n", "   \n   \n"),
    ],
)
def test_markup_becomes_spaces_in_place(markdown: str, text: str) -> None:
    assert markdown_to_text(markdown) == text


def test_every_character_kept_is_where_the_file_has_it() -> None:
    text = markdown_to_text(RECYCLING)
    assert len(text) == len(RECYCLING)
    kept = [(i, c) for i, c in enumerate(text) if not c.isspace()]
    assert all(RECYCLING[i] == c for i, c in kept)
    assert {c for i, c in enumerate(text) if c != RECYCLING[i]} == {" "}
    words = text.split()
    for absent in ("#", "**depot**", "https://example.org/quay_(east))", "bin.png", "|", "```sh"):
        assert absent not in words
    for word in ("Recycling", "Lenholm", "depot", "Quay", "blue", "jars", "--glass", "cans"):
        start = RECYCLING.index(word, RECYCLING.index("# "))  # after the front matter
        assert text[start : start + len(word)] == word
    assert "title:" not in text  # front matter is no part of the document's text
    assert "snake_case" in words and "2*3*4" in words and "*escaped" in words


def test_ask_index_answers_point_into_the_markdown_file(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "recycling.md").write_bytes(RECYCLING.encode("utf-8"))
    build_index([docs], tmp_path / "index", IndexSettings(max_words=40))
    result = CliRunner().invoke(
        app,
        [
            "ask", "Where is the recycling depot?", "--index", str(tmp_path / "index"),
            "--model", str(tiny_model_dir), "--retriever", "bm25", "--json", "--top-k", "10",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    answers = json.loads(result.stdout)
    answers = answers if isinstance(answers, list) else [answers]
    assert answers and all(not a["no_answer"] for a in answers)
    for item in answers:
        answer, start, end = item["answer"], item["start"], item["end"]
        original = RECYCLING[start:end]
        # Offsets into the file: each character of the answer is the file's at that offset,
        # the markup between them read as spaces; no answer is markup ("#" at 0-1).
        assert len(original) == len(answer) and answer.strip() == answer
        assert all(a == o for a, o in zip(answer, original, strict=True) if a != " ")
        assert not set(answer) & {"#", "|", "`"}
        passage = RECYCLING[item["passage_start"] : item["passage_end"]]
        assert markdown_to_text(RECYCLING)[item["passage_start"] : item["passage_end"]] == (
            item["passage_text"]
        ) and len(passage) == len(item["passage_text"])
