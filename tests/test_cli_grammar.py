"""One command-line grammar: ``--model`` on every command that takes a model (``serve``,
``export`` and ``push`` keep their argument as an alias), ``train --max-minutes``, ``ask``
naming the run it picked, ``ask --context-file`` reading HTML as ``index`` does, and answers
that show a paragraph break."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.cli.terminal import one_line

runner = CliRunner()
QUESTION = "Who designed the Verrin Bay Bridge?"
PAGE = (
    "<html><head><title>T</title><style>p {color: red}</style></head><body>"
    "<h1>The bridge</h1><p>It was designed by <b>Alma Stroud</b>.</p>"
    "<p>It opened in 1931.</p></body></html>"
)
PAGE_TEXT = "The bridge\n\nIt was designed by Alma Stroud.\n\nIt opened in 1931."


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The models ``serve`` would start serving (the server itself is not started)."""
    from qa_finetune.cli import serve as serve_command
    from qa_finetune.serving import command

    models: list[str] = []
    monkeypatch.setattr(command, "require_serve_extra", lambda: None)
    monkeypatch.setattr(command, "serve", lambda model, **options: models.append(model))
    monkeypatch.setattr(serve_command, "_runs_on_tensorflow", lambda *args: False)
    return models


@pytest.mark.parametrize(
    "args",
    [["--model", "outputs/mine"], ["-m", "outputs/mine"], ["outputs/mine"]],
    ids=["--model", "-m", "argument"],
)
def test_serve_takes_the_model_as_an_option_or_its_argument(
    served: list[str], args: list[str]
) -> None:
    result = runner.invoke(app, ["serve", *args, "--port", "8123"])
    assert result.exit_code == 0, result.output
    assert served == ["outputs/mine"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ([], "error: no model: qa-finetune serve --model RUN_OR_MODEL_FOLDER"),
        (
            ["outputs/a", "--model", "outputs/b"],
            "error: two models given (outputs/a and --model outputs/b): name it once, "
            "qa-finetune serve --model MODEL",
        ),
    ],
)
def test_serve_without_a_model_or_with_two_is_one_line(
    served: list[str], args: list[str], line: str
) -> None:
    result = runner.invoke(app, ["serve", *args])
    assert result.exit_code == 1
    assert result.stderr.strip() == line
    assert served == []


def test_serve_accepts_the_same_model_named_both_ways(served: list[str]) -> None:
    result = runner.invoke(app, ["serve", "outputs/a", "--model", "outputs/a"])
    assert result.exit_code == 0, result.output
    assert served == ["outputs/a"]


@pytest.mark.parametrize("how", ["option", "argument"])
def test_export_and_push_take_the_model_both_ways(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.publish import export, hub

    run = tmp_path / "run"
    run.mkdir()
    exported: list[Path] = []
    pushed: list[Path] = []
    monkeypatch.setattr(export, "check_source", lambda run_dir: None)
    monkeypatch.setattr(
        export, "export_run", lambda run_dir, *args, **kwargs: exported.append(run_dir) or run_dir
    )
    monkeypatch.setattr(
        hub,
        "push_run",
        lambda run_dir, *args, **kwargs: pushed.append(run_dir) or _Pushed(),
    )
    named = ["--model", str(run)] if how == "option" else [str(run)]
    result = runner.invoke(app, ["export", *named, "--format", "hf"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["push", *named, "--repo-id", "me/model"])
    assert result.exit_code == 0, result.output
    assert exported == [run] and pushed == [run]


class _Pushed:
    url = "https://huggingface.co/me/model"
    files = ("model.safetensors",)


def test_train_max_minutes_sets_the_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from qa_finetune.training import trainer

    configs: list[Any] = []
    monkeypatch.setattr(trainer, "train", lambda config, **kwargs: configs.append(config))
    result = runner.invoke(
        app, ["train", "--config", "configs/default.yaml", "--max-minutes", "2.5"]
    )
    assert result.exit_code == 0, result.output
    assert configs[0].train.max_minutes == 2.5
    result = runner.invoke(app, ["train", "--max-minutes", "0"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: config key 'train.max_minutes': must be > 0 or null, got 0.0"
    )


def test_ask_without_model_names_the_run_it_picked(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.runs import lookup

    monkeypatch.setattr(lookup, "latest_run", lambda root: tiny_model_dir)
    context = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."
    result = runner.invoke(app, ["ask", QUESTION, "--context", context, "--json"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        f"model: {tiny_model_dir} (the latest run; --model chooses another)"
    )
    answer = json.loads(result.stdout)  # stdout holds the answer alone
    assert context[answer["start"] : answer["end"]] == answer["answer"]


def test_a_context_file_in_html_is_read_as_index_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.cli import context_input
    from qa_finetune.cli.context_input import read_context

    monkeypatch.setattr(context_input, "_stdin_bytes", lambda wait: None)  # nothing piped

    page = tmp_path / "page.html"
    page.write_text(PAGE, encoding="utf-8")
    assert read_context(None, page) == PAGE_TEXT
    markdown = tmp_path / "notes.md"
    markdown.write_bytes(b"# Notes\r\n\r\nKept *exactly*.\r\n")
    # Markdown's markup reads as spaces: the text keeps the file's offsets.
    assert read_context(None, markdown) == "  Notes\r\n\r\nKept  exactly .\r\n"


def test_ask_answers_from_the_text_of_an_html_page(tiny_model_dir: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(PAGE, encoding="utf-8")
    args = ["ask", QUESTION, "--context-file", str(page), "--model", str(tiny_model_dir)]
    result = runner.invoke(app, [*args, "--json", "--top-k", "5"])
    assert result.exit_code == 0, result.output
    for item in json.loads(result.stdout):
        # Offsets into the page's text, not into its markup.
        assert PAGE_TEXT[item["start"] : item["end"]] == item["answer"]
        assert "<" not in item["answer"]


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            b"",
            "error: cannot use --context-file {path}: empty: the file holds nothing; pass the "
            "file with the text",
        ),
        (
            b"<html><body><script>x()</script></body></html>",
            "error: cannot use --context-file {path}: no text in the HTML",
        ),
    ],
)
def test_an_html_file_without_text_is_one_line(tmp_path: Path, data: bytes, line: str) -> None:
    page = tmp_path / "page.html"
    page.write_bytes(data)
    result = runner.invoke(app, ["ask", QUESTION, "--context-file", str(page), "-m", "none"])
    assert result.exit_code == 1
    assert result.stderr.strip() == line.format(path=page)


def test_a_damaged_pdf_is_one_line_with_its_fix(tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4 garbage")
    result = runner.invoke(app, ["ask", QUESTION, "--context-file", str(pdf), "-m", "none"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: cannot use --context-file {pdf}: unreadable PDF (PdfStreamError): damaged, or "
        "not a PDF; export it again, or pass its text as a .txt file"
    )


def test_an_answer_across_paragraphs_shows_the_break() -> None:
    assert one_line("Alma Stroud.\n\nIt opened") == "Alma Stroud. ¶ It opened"
    assert one_line("Alma\r\n \r\n\r\nStroud") == "Alma ¶ Stroud"
    assert one_line("designed\nby  Alma") == "designed by Alma"
    assert one_line("one paragraph") == "one paragraph"
    # A lone carriage return is no line end: kept, for ``visible`` to show as \r.
    assert one_line("Stroud\rX") == "Stroud\rX"


def test_a_printed_answer_shows_the_paragraph_break(capsys: pytest.CaptureFixture[str]) -> None:
    from qa_finetune.cli.ask import _print_answers

    answers = [{"answer": "Alma Stroud.\n\nIt opened", "score": 0.5, "start": 3, "end": 26}]
    _print_answers(answers, top_k=1, as_json=False)
    assert (
        capsys.readouterr().out
        == "Alma Stroud. ¶ It opened  (score 0.500, uncalibrated, chars 3-26)\n"
    )
