"""Export, push staging and evaluate output replace or write only what they made.

Staging folders get unique names (a user's ``DIR.tmp``/``DIR.old`` are never touched); an
export replaces only a folder with its marker; push stages only into a new, empty or marked
folder; evaluate never writes into a run's, model's or export's folder; and a wrong type in
an export's ``qa_config.json`` is one line naming the file and key.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files.staged_folders import replace_folder, staged_folder
from qa_finetune.publish.hub import push_run

RECORD = {
    "id": "a",
    "question": "Who designed the bridge?",
    "context": "Alma Stroud designed the bridge in 1931.",
    "answers": {"text": ["Alma Stroud"], "answer_start": [0]},
}
TAGGED_README = "---\ntags:\n- qa-finetune\n---\n# my model\n"


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its digest (folders by their files)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def one_error_line(args: list[str]) -> str:
    """Run the CLI; assert exit 1 and exactly one ``error:`` line; return it."""
    result = CliRunner().invoke(app, args)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.exit_code == 1, result.output
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


def fake_run(folder: Path) -> Path:
    """A finished-looking run: config, metrics, a model folder and a checkpoint index."""
    for name, text in {
        "config.yaml": Config().to_yaml(),
        "metrics.json": '{"f1": 50.0}\n',
        "model/config.json": '{"model_type": "bert"}',
        "checkpoints/checkpoint": 'model_checkpoint_path: "ckpt-3"\n',
    }.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


# --- staging names -----------------------------------------------------------------------


def test_staging_leaves_the_users_tmp_and_old_folders_alone(tmp_path: Path) -> None:
    target = tmp_path / "out"
    for name in ("out.tmp", "out.old"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "mine.txt").write_text(name)
    (target).mkdir()
    (target / "before.txt").write_text("old export")

    with staged_folder(target) as staging:
        assert staging.parent == tmp_path and staging.name.startswith(".out.staging-")
        (staging / "after.txt").write_text("new export")

    assert tree(tmp_path) == tree_of(
        {
            "out.tmp/mine.txt": "out.tmp",
            "out.old/mine.txt": "out.old",
            "out/after.txt": "new export",
        }
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.old", "out.tmp"]


def tree_of(files: dict[str, str]) -> dict[str, str]:
    return {name: hashlib.sha256(text.encode()).hexdigest() for name, text in sorted(files.items())}


def test_failed_staging_removes_only_its_own_folder(tmp_path: Path) -> None:
    (tmp_path / "out.tmp").mkdir()
    (tmp_path / "out.tmp" / "mine.txt").write_text("mine")
    with pytest.raises(RuntimeError, match="boom"), staged_folder(tmp_path / "out") as staging:
        (staging / "half.bin").write_bytes(b"x")
        raise RuntimeError("boom")
    assert tree(tmp_path) == tree_of({"out.tmp/mine.txt": "mine"})
    assert [p.name for p in tmp_path.iterdir()] == ["out.tmp"]


def test_failed_swap_puts_the_old_folder_back(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    with pytest.raises(FileNotFoundError):
        replace_folder(tmp_path / "no-such-staging", target)
    assert tree(tmp_path) == tree_of({"out/keep.txt": "keep"})
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


# --- export --------------------------------------------------------------------------------


@pytest.fixture()
def model_copy(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """The tiny model as a model folder of its own (``export --checkpoint best`` reads it)."""
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "tiny"))


def export_args(source: Path, output: Path, fmt: str = "hf") -> list[str]:
    return ["export", str(source), "--format", fmt, "--checkpoint", "best", "--output", str(output)]


NEVER = "qa-finetune export never replaces it; choose a new"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("run", f"is a run directory: {NEVER} --output folder"),
        (
            "root",
            f"is an output root (it holds runs or their feature cache): {NEVER} --output folder",
        ),
        ("features", f"is a feature cache: {NEVER} --output folder"),
        (
            "user",
            "is not empty and was not made by qa-finetune export (it has no .qa-finetune-export "
            f"file): {NEVER} or empty --output folder",
        ),
    ],
    ids=["run", "root", "features", "user"],
)
def test_export_never_replaces_a_folder_it_did_not_make(
    kind: str, expected: str, model_copy: Path, tmp_path: Path
) -> None:
    outputs = tmp_path / "outputs"
    fake_run(outputs / "r")
    (outputs / "features" / "abc").mkdir(parents=True)
    (outputs / "features" / "abc" / "prepare_report.json").write_text("{}")
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "notes.txt").write_text("mine")
    target = {
        "run": outputs / "r",
        "root": outputs,
        "features": outputs / "features",
        "user": tmp_path / "user",
    }[kind]
    before = tree(tmp_path)

    line = one_error_line([*export_args(model_copy, target), "--overwrite"])

    assert line == f"error: {target} {expected}"
    assert tree(tmp_path) == before


def test_export_replaces_its_own_export_and_marks_it(model_copy: Path, tmp_path: Path) -> None:
    target = tmp_path / "exported"
    result = CliRunner().invoke(app, export_args(model_copy, target))
    assert result.exit_code == 0, result.output
    assert (target / ".qa-finetune-export").read_text() == "hf\n"
    (target / "stale.txt").write_text("from the first export")

    line = one_error_line(export_args(model_copy, target))
    assert line == f"error: {target} already exists: pass --overwrite or choose --output"

    result = CliRunner().invoke(app, [*export_args(model_copy, target), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert not (target / "stale.txt").exists()
    assert (target / ".qa-finetune-export").read_text() == "hf\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exported", "tiny"]


def test_best_in_place_adds_no_marker_to_the_runs_model(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """``export RUN/model --format hf --checkpoint best`` re-saves the run's folder as it is."""
    model = Path(shutil.copytree(tiny_model_dir, tmp_path / "run" / "model"))
    (tmp_path / "run" / "config.yaml").write_text(Config().to_yaml())
    result = CliRunner().invoke(app, ["export", str(model), "--checkpoint", "best"])
    assert result.exit_code == 0, result.output
    assert (model / "model.safetensors").is_file()
    assert not (model / ".qa-finetune-export").exists()


def test_a_model_folder_of_its_own_is_never_rewritten_in_place(model_copy: Path) -> None:
    """``export my-model/`` (no run around it, no --output) once rewrote the folder and
    deleted the user's README.md, training_args.txt and sub/."""
    (model_copy / "README.md").write_text("my card")
    (model_copy / "training_args.txt").write_text("lr=3e-5")
    (model_copy / "sub").mkdir()
    (model_copy / "sub" / "notes.txt").write_text("mine")
    before = tree(model_copy.parent)
    line = one_error_line(["export", str(model_copy)])
    assert line == (
        f"error: {model_copy} is a model folder of its own, not a run's model/: export never "
        "rewrites it in place (its other files would go); pass --output NEW_FOLDER"
    )
    assert tree(model_copy.parent) == before


def test_staging_folders_of_a_killed_export_are_removed(model_copy: Path, tmp_path: Path) -> None:
    """A SIGKILL leaves ``.DIR.staging-PID-RANDOM``; the next export of DIR removes those of
    processes that no longer run, and nothing else (a live process's, a user's look-alike)."""
    import os
    import subprocess

    child = subprocess.Popen(["true"])  # its pid: a process that no longer runs
    child.wait()
    target = tmp_path / "exported"
    stale = tmp_path / f".exported.staging-{child.pid}-0123abcd"
    live = tmp_path / f".exported.staging-{os.getpid()}-4567abcd"
    mine = tmp_path / ".exported.staging-mine"
    for folder in (stale, live, mine):
        folder.mkdir()
        (folder / "tf_model.h5").write_text("half")
    result = CliRunner().invoke(app, export_args(model_copy, target))
    assert result.exit_code == 0, result.output
    assert not stale.exists() and live.is_dir() and mine.is_dir()


def test_a_full_disk_is_one_line(
    model_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """h5py reports a full disk as "Can't close file (errno = 2)": the one-liner says it."""
    import dataclasses

    import qa_finetune.files.disk_space as disk_space
    from qa_finetune.modeling import formats

    def full(model: object, tokenizer: object, staging: Path, quantize: object) -> list[str]:
        (staging / "tf_model.h5").write_bytes(b"half")
        raise OSError("Unable to synchronously close file (Can't close file (errno = 2))")

    hf = dataclasses.replace(formats.REGISTRY["hf"], write=full)
    monkeypatch.setitem(formats.REGISTRY, "hf", hf)
    free = {"bytes": 10**9}
    usage = shutil.disk_usage
    monkeypatch.setattr(
        disk_space.shutil, "disk_usage", lambda path: usage(path)._replace(free=free["bytes"])
    )
    target = tmp_path / "exported"
    before = tree(tmp_path)
    free["bytes"] = 0
    line = one_error_line(export_args(model_copy, target))
    assert line == f"error: no space left on {tmp_path}: free space or choose another --output"
    assert tree(tmp_path) == before
    # With room on the disk the same error is not called a full disk.
    free["bytes"] = 10**9
    assert "no space left" not in one_error_line(export_args(model_copy, target))


def test_an_export_made_before_the_marker_can_be_replaced(model_copy: Path, tmp_path: Path) -> None:
    old = tmp_path / "old-onnx"
    old.mkdir()
    (old / "qa_config.json").write_text(json.dumps({"format": "onnx", "stride": 128}))
    result = CliRunner().invoke(app, [*export_args(model_copy, old, "savedmodel"), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert (old / ".qa-finetune-export").read_text() == "savedmodel\n"
    assert json.loads((old / "qa_config.json").read_text())["format"] == "savedmodel"


# --- push --dry-run --------------------------------------------------------------------------


def pushable_run(tiny_model_dir: Path, folder: Path) -> Path:
    fake_run(folder)
    shutil.rmtree(folder / "model")
    shutil.copytree(tiny_model_dir, folder / "model")
    return folder


def test_push_never_clears_a_tagged_folder_it_did_not_stage(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run = pushable_run(tiny_model_dir, tmp_path / "run")
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    (clone / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (clone / "README.md").write_text(TAGGED_README)
    before = tree(tmp_path)

    line = one_error_line(
        ["push", str(run), "--repo-id", "me/m", "--dry-run", "--staging-dir", str(clone)]
    )

    assert line == (
        f"error: {clone} is not empty and was not made by qa-finetune push (it has no "
        ".qa-finetune-staging file): qa-finetune push never replaces it; choose a new or empty "
        "--staging-dir folder"
    )
    assert tree(tmp_path) == before


def test_push_replaces_its_own_staging_and_never_uploads_markers(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run = pushable_run(tiny_model_dir, tmp_path / "run")
    (run / "onnx").mkdir()
    (run / "onnx" / "qa_config.json").write_text('{"format": "onnx"}')
    (run / "onnx" / ".qa-finetune-export").write_text("onnx\n")
    staging = tmp_path / "staging"
    first = push_run(run, "me/m", dry_run=True, staging_dir=staging)
    (staging / "leftover.txt").write_text("x")

    second = push_run(run, "me/m", dry_run=True, staging_dir=staging)

    assert second.files == first.files
    assert "onnx/qa_config.json" in second.files
    assert not any(".qa-finetune" in name for name in second.files)
    on_disk = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
    assert on_disk == sorted([*second.files, ".qa-finetune-staging"])


# --- evaluate --------------------------------------------------------------------------------


@pytest.fixture()
def scored(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(RECORD) + "\n")
    predictions = tmp_path / "p.json"
    predictions.write_text('{"a": "Alma Stroud"}')
    return data, predictions


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (
            "run",
            "is a run directory: evaluate would overwrite its files; choose another folder, "
            "e.g. {folder}/eval (the default)",
        ),
        (
            "model",
            "is a model folder: evaluate would overwrite its files; choose another folder, "
            "e.g. a new folder",
        ),
        (
            "export",
            "is an export folder: evaluate would overwrite its files; choose another "
            "folder, e.g. a new folder",
        ),
    ],
    ids=["run", "model", "export"],
)
def test_evaluate_refuses_a_runs_own_folder(
    kind: str, expected: str, scored: tuple[Path, Path], tmp_path: Path
) -> None:
    run = fake_run(tmp_path / "run")
    (run / "onnx").mkdir()
    (run / "onnx" / ".qa-finetune-export").write_text("onnx\n")
    folder = {"run": run, "model": run / "model", "export": run / "onnx"}[kind]
    data, predictions = scored
    before = tree(tmp_path)
    common = ["--data", str(data), "--report-dir", str(folder)]

    for args in (["--predictions", str(predictions)], ["--model", str(run)]):
        line = one_error_line(["evaluate", *args, *common])
        assert line == f"error: --report-dir {folder} " + expected.format(folder=folder)
    assert tree(tmp_path) == before


def test_evaluate_writes_a_new_output_folder(scored: tuple[Path, Path], tmp_path: Path) -> None:
    data, predictions = scored
    args = ["evaluate", "--predictions", str(predictions), "--data", str(data)]
    result = CliRunner().invoke(app, [*args, "--report-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["exact_match"] == 100.0


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--model", "some/model"], "--model"),
        (["--model", "m", "--stride", "16"], "--model, --stride"),
        (["--max-samples", "3"], "--max-samples"),
    ],
    ids=["model", "model-and-stride", "max-samples"],
)
def test_predictions_with_model_options_is_an_error(
    extra: list[str],
    named: str,
    scored: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # the default output folder, eval/, would be made here
    data, predictions = scored
    line = one_error_line(
        ["evaluate", "--predictions", str(predictions), "--data", str(data), *extra]
    )
    assert line == (
        f"error: --predictions scores a predictions file alone, so {named} would be ignored: "
        "drop it, or drop --predictions to run and score the model"
    )
    assert not (tmp_path / "eval").exists()


# --- qa_config.json ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("stride", "x", "'stride' must be a whole number, not \"x\""),
        ("max_length", 64.5, "'max_length' must be a whole number, not 64.5"),
        ("n_best", True, "'n_best' must be a whole number, not true"),
        ("question_first", "yes", "'question_first' must be true or false, not \"yes\""),
        ("truncation_side", "up", '\'truncation_side\' must be "left" or "right", not "up"'),
        ("input_names", "input_ids", "'input_names' must be a list of input names, not"),
        ("cls_token_id", -1, "'cls_token_id' must be a token id (>= 0), not -1"),
        ("no_answer_threshold", "0", "'no_answer_threshold' must be a number, not"),
    ],
    ids=[
        "stride",
        "max_length",
        "n_best",
        "question_first",
        "truncation_side",
        "input_names",
        "cls_token_id",
        "no_answer_threshold",
    ],
)
def test_wrong_type_in_qa_config_is_one_line(
    key: str, value: object, expected: str, model_copy: Path
) -> None:
    from qa_finetune.modeling.formats.qa_config import read_qa_config

    path = model_copy / "qa_config.json"
    path.write_text(json.dumps({"format": "onnx", "stride": 16, key: value}))
    with pytest.raises(QAFinetuneError) as caught:
        read_qa_config(model_copy)
    assert str(caught.value).startswith(f"{path}: {expected}")
    assert str(caught.value).endswith(": fix it or export the model again")

    line = one_error_line(["ask", "Who?", "--context", "Alma.", "--model", str(model_copy)])
    assert line == f"error: {caught.value}"
