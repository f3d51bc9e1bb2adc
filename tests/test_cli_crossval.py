"""``qa-finetune crossval`` end to end on the tiny model: folds grouped by document, ordinary
run directories scored as ``evaluate`` scores them, a summary, resuming, and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tiny_runs import tiny_run_config
from typer.testing import CliRunner

from qa_finetune.cli.app import app

runner = CliRunner()
# The first 60 sample questions: 4 titles, so 2 folds group by title (2 titles per fold).
QUESTIONS = 60


def _config(tmp_path: Path, model_dir: Path, **data: Any) -> Path:
    config = tiny_run_config(model_dir, tmp_path / "outputs", max_steps=2).to_dict()
    config["data"].update({"max_train_samples": QUESTIONS, "validation_file": None, **data})
    config["train"].update(run_name="cv", checkpoint_every_steps=None, eval_every_steps=None)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _crossval(config: Path, *args: str) -> Any:
    return runner.invoke(app, ["crossval", "--config", str(config), "--folds", "2", *args])


def _contexts(path: Path) -> set[str]:
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    return {p["context"] for article in data for p in article["paragraphs"]}


def _ids(path: Path) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    return [qa["id"] for a in data for p in a["paragraphs"] for qa in p["qas"]]


@pytest.fixture(scope="module")
def crossval_run(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """A finished 2-fold crossval; returns its folder."""
    tmp_path = tmp_path_factory.mktemp("crossval")
    result = _crossval(_config(tmp_path, tiny_model_dir), "--seed", "3")
    assert result.exit_code == 0, result.output
    assert "grouped by title" in result.stdout
    assert "mean ± sd" in result.stdout
    return tmp_path / "outputs" / "cv"


def test_folds_never_share_a_context(crossval_run: Path) -> None:
    data = [crossval_run / "data" / f"fold-{i}" for i in range(2)]
    tests = [_contexts(folder / "test.json") for folder in data]
    assert tests[0] and tests[1] and not tests[0] & tests[1]
    for folder in data:
        parts = [_contexts(folder / f"{name}.json") for name in ("train", "select", "test")]
        assert all(parts)
        assert not parts[0] & parts[1] and not parts[0] & parts[2] and not parts[1] & parts[2]
    test_ids = _ids(data[0] / "test.json") + _ids(data[1] / "test.json")
    assert len(test_ids) == len(set(test_ids)) == QUESTIONS
    # A fold trains on the other folds, less the documents its run chooses on.
    trained = _ids(data[0] / "train.json") + _ids(data[0] / "select.json")
    assert sorted(trained) == sorted(_ids(data[1] / "test.json"))


def test_each_fold_is_a_run_scored_as_evaluate_scores_it(
    crossval_run: Path, tmp_path: Path
) -> None:
    from qa_finetune.evaluation.evaluate import evaluate_model

    summary = json.loads((crossval_run / "crossval.json").read_text())
    assert summary["complete"] and summary["settings"]["group_by"] == "title"
    assert summary["settings"]["choose_on"] == "training documents"
    assert [row["fold"] for row in summary["folds"]] == [0, 1]
    for row in summary["folds"]:
        run_dir = crossval_run / f"fold-{row['fold']}"
        assert (run_dir / "model").is_dir() and (run_dir / "config.yaml").is_file()
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        test = crossval_run / "data" / f"fold-{row['fold']}" / "test.json"
        # keep_model: best chooses a checkpoint: on held-out training documents, not the test.
        assert config["data"]["validation_file"] == str(test.with_name("select.json"))
        assert json.loads((run_dir / "metrics.json").read_text())["steps"] == 2
        alone = evaluate_model(
            str(run_dir), data=str(test), dataset=None, report_dir=tmp_path / str(row["fold"])
        )
        assert (row["exact_match"], row["f1"]) == (alone["exact_match"], alone["f1"])
        assert row["test_questions"] == alone["total"]
    f1 = [row["f1"] for row in summary["folds"]]
    assert summary["mean"]["f1"] == pytest.approx(sum(f1) / 2)
    assert summary["sd"]["f1"] == pytest.approx(abs(f1[0] - f1[1]) / 2**0.5)


def test_same_seed_same_folds(crossval_run: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from qa_finetune.config import load_config
    from qa_finetune.crossval.runner import plan_crossval

    config = load_config(_config(tmp_path, tiny_model_dir))
    first, second = (plan_crossval(config, 2, seed=3) for _ in range(2))
    assert first.folds.fold_of.tolist() == second.folds.fold_of.tolist()
    written = _ids(crossval_run / "data" / "fold-0" / "test.json")
    ids = [first.records[i]["id"] for i in first.folds.test_indices(0)]
    assert sorted(ids) == sorted(written)


def _recording_train(monkeypatch: pytest.MonkeyPatch, fail_on: str | None = None) -> list:
    """Record (run name, resume) of each training the crossval starts; optionally stop with
    an interruption when it starts the run ``fail_on``."""
    import qa_finetune.training.trainer as trainer

    calls: list[tuple[str, bool]] = []
    original = trainer.train

    def train(config: Any, resume: bool = False, **kwargs: Any) -> Path:
        calls.append((config.train.run_name, resume))
        if config.train.run_name == fail_on:
            raise KeyboardInterrupt
        return original(config, resume=resume, **kwargs)

    monkeypatch.setattr(trainer, "train", train)
    return calls


# Among the slowest of the fast suite (a tiny model trained or served end to end): make test-slow.
@pytest.mark.slow
def test_an_interrupted_crossval_continues_without_redoing_finished_folds(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path, tiny_model_dir)
    root = tmp_path / "outputs" / "cv"
    calls = _recording_train(monkeypatch, fail_on="fold-1")
    assert _crossval(config).exit_code == 130  # interrupted, as by Ctrl-C
    assert calls == [("fold-0", False), ("fold-1", False)]
    assert json.loads((root / "crossval.json").read_text())["complete"] is False
    model_file = root / "fold-0" / "model" / "model.safetensors"
    trained = model_file.stat().st_mtime_ns

    monkeypatch.undo()
    calls = _recording_train(monkeypatch)
    result = _crossval(config)
    assert result.exit_code == 0, result.output
    assert calls == [("fold-1", False)]
    assert "Fold 0: " in result.stdout and "not redone" in result.stdout
    assert model_file.stat().st_mtime_ns == trained
    summary = json.loads((root / "crossval.json").read_text())
    assert summary["complete"] and len(summary["folds"]) == 2

    # A fold whose run lost its metrics is trained again (its checkpoint went when it
    # finished); the other is not redone.
    (root / "fold-1" / "metrics.json").unlink()
    monkeypatch.undo()
    calls = _recording_train(monkeypatch)
    result = _crossval(config)
    assert result.exit_code == 0, result.output
    assert calls == [("fold-1", False)]
    assert (root / "fold-1" / "metrics.json").is_file()
    assert json.loads((root / "crossval.json").read_text())["folds"] == summary["folds"]

    # Other settings in the same folder: one line, nothing changed.
    before = (root / "crossval.json").read_bytes()
    result = _crossval(config, "--seed", "9")
    assert result.exit_code == 1 and "another --run-name" in result.stderr
    assert (root / "crossval.json").read_bytes() == before


@pytest.mark.parametrize(
    ("args", "data", "fragment"),
    [
        (["--folds", "1"], {}, "at least 2 folds"),
        (["--folds", "5", "--group-by", "title"], {}, "5 folds need at least 5 documents"),
        (["--folds", "500"], {}, "500 folds need at least 500 documents"),
        (["--group-by", "words"], {}, "--group-by must be title, context or auto"),
        # Two folds of two titles: each fold's run trains on one document, none to choose on.
        (["--group-by", "title"], {"max_train_samples": 30}, "too few to hold one out"),
        ([], {"train_file": "missing.json"}, "training file not found"),
        ([], {"train_file": None}, "crossval needs local training data"),
        (["--passes", "0"], {}, "--passes must be 1 to 64, got 0"),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing(
    tmp_path: Path, args: list[str], data: dict, fragment: str
) -> None:
    config = _config(tmp_path, tmp_path / "no-model", **data)
    result = runner.invoke(app, ["crossval", "--config", str(config), "--folds", "2", *args])
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and fragment in errors[0], result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "outputs").exists()


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
        for p in root.rglob("*")
    }


@pytest.mark.parametrize("root_existed", [False, True])
def test_a_crossval_stopped_before_any_checkpoint_removes_only_its_own_folder(
    root_existed: bool, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import qa_finetune.training.trainer as trainer

    config = _config(tmp_path, tiny_model_dir)
    outputs = tmp_path / "outputs"
    for name, text in {
        "other/config.yaml": "train: {}\n",
        "other/model/config.json": "{}",
        "features/abc/prepare_report.json": "{}",
        "notes.txt": "mine",
        **({"cv/mine.txt": "mine too"} if root_existed else {}),
    }.items():
        (outputs / name).parent.mkdir(parents=True, exist_ok=True)
        (outputs / name).write_text(text, encoding="utf-8")
    before = _tree(tmp_path)

    def interrupted(*args: Any, **kwargs: Any) -> Path:
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "train", interrupted)
    result = _crossval(config)
    assert result.exit_code != 0
    # A crossval folder this command made goes whole (no fold reached a checkpoint); one that
    # was there before keeps the user's file, and nothing outside it changes either way.
    after = _tree(tmp_path)
    outside = {k: v for k, v in after.items() if not k.startswith("outputs/cv/")}
    assert outside == {k: v for k, v in before.items() if not k.startswith("outputs/cv/")}
    assert after.get("outputs/cv/mine.txt") == before.get("outputs/cv/mine.txt")
    assert (outputs / "cv").exists() == root_existed


@pytest.mark.parametrize(("args", "passes"), [([], 1), (["--passes", "2"], 2)])
def test_each_fold_is_scored_in_the_passes_asked_for(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, args: list, passes: int
) -> None:
    from qa_finetune.crossval import runner as crossval_runner

    scored: list[int] = []

    def run_fold(config: Any, root: Path, fold: int, files: Any, passes: int = 1) -> dict:
        scored.append(passes)
        return {"exact_match": 50.0, "f1": 60.0}

    monkeypatch.setattr(crossval_runner, "run_fold", run_fold)
    result = _crossval(_config(tmp_path, tiny_model_dir), *args)
    assert result.exit_code == 0, result.output
    assert scored == [passes, passes]
