"""Each destructive command, pointed at each kind of folder, changes only what it made.

One tree holds a real run (model, TF checkpoint, metrics, eval/), another run, the feature
cache, an earlier export and an earlier push staging folder (each with its marker), and the
user's own files: a folder with ``DIR.old`` and ``DIR.tmp`` beside it, and a local clone of a
Hub repo (``.git/`` and a README carrying the project's tag). ``export`` (hf, savedmodel,
onnx), ``push --dry-run`` and ``evaluate`` run with their output at every folder of the tree;
a snapshot of every file and folder before and after shows what changed.
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

RECORD = {
    "id": "a",
    "question": "Who designed the bridge?",
    "context": "Alma Stroud designed the bridge in 1931.",
    "answers": {"text": ["Alma Stroud"], "answer_start": [0]},
}
USER_FILES = {
    "mine/notes.txt": "my notes",
    "mine.old/a.txt": "kept",
    "mine.tmp/b.txt": "kept too",
    "new.old/c.txt": "beside the fresh target",
    "new.tmp/d.txt": "beside the fresh target too",
    ".new.staging/e.txt": "a hidden folder of the user's",
    "clone/.git/HEAD": "ref: refs/heads/main\n",
    "clone/README.md": "---\ntags:\n- qa-finetune\n---\n# my model\n",
    "clone/extra.txt": "the user's file in the clone",
    "outputs/other/config.yaml": "train: {}\n",
    "outputs/other/model/config.json": '{"model_type": "bert"}',
    "outputs/other/checkpoints/checkpoint": 'model_checkpoint_path: "ckpt-9"\n',
    "outputs/features/abc/prepare_report.json": "{}",
    "outputs/features/abc/train/data.arrow": "arrow",
    "outputs/exp/.qa-finetune-export": "hf\n",
    "outputs/exp/config.json": '{"model_type": "bert"}',
    "stage/.qa-finetune-staging": "qa-finetune push\n",
    "stage/README.md": "an earlier dry run",
    "d.jsonl": json.dumps(RECORD) + "\n",
    "p.json": '{"a": "Alma Stroud"}',
}
# Every kind of folder an output option may name ("." is the whole tree).
TARGETS = [
    ".",
    "outputs",
    "outputs/r",
    "outputs/r/model",
    "outputs/r/checkpoints",
    "outputs/r/eval",
    "outputs/features",
    "outputs/features/abc",
    "mine",
    "clone",
    "clone/.git",
    "outputs/exp",
    "stage",
    "new",
]
# The folders each command may write; every other target must be refused with nothing changed.
ALLOWED = {
    "export": {"new", "outputs/exp"},  # a fresh folder, or an export's own folder
    "push": {"new", "stage"},  # a fresh folder, or an earlier staging folder
    # evaluate only adds its files to a folder that belongs to no run, model or export.
    "evaluate": {".", "outputs/r/eval", "mine", "clone", "clone/.git", "stage", "new"},
}


@pytest.fixture(scope="module")
def template(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree, built once: a real run ``outputs/r`` and the files above."""
    import tensorflow as tf

    from qa_finetune.modeling.loading import load_qa_model

    root = tmp_path_factory.mktemp("tree")
    run = root / "outputs" / "r"
    shutil.copytree(tiny_model_dir, run / "model")
    tf.train.Checkpoint(model=load_qa_model(run / "model")).save(str(run / "checkpoints" / "ckpt"))
    files = {
        **USER_FILES,
        "outputs/r/config.yaml": Config().to_yaml(),
        "outputs/r/metrics.json": '{"f1": 50.0}\n',
        "outputs/r/history.csv": "epoch,step,loss\n1,3,5.9\n",
        "outputs/r/eval/metrics.json": '{"f1": 40.0}\n',
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, str]:
    """Every file (its digest) and every folder under ``root``."""
    return {
        p.relative_to(root).as_posix(): (
            "folder" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        )
        for p in root.rglob("*")
    }


def command(kind: str, root: Path, target: Path) -> list[str]:
    run = str(root / "outputs" / "r")
    if kind.startswith("export-"):
        fmt = kind.removeprefix("export-")
        return ["export", run, "--format", fmt, "--output", str(target), "--overwrite"]
    if kind == "push":
        return ["push", run, "--repo-id", "me/m", "--dry-run", "--staging-dir", str(target)]
    data, predictions = str(root / "d.jsonl"), str(root / "p.json")
    return ["evaluate", "--predictions", predictions, "--data", data, "--report-dir", str(target)]


def under(path: str, folder: str) -> bool:
    return folder == "." or path == folder or path.startswith(folder + "/")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "kind", ["export-hf", "export-savedmodel", "export-onnx", "push", "evaluate"]
)
def test_only_what_the_command_made_changes(
    kind: str, target: str, template: Path, tmp_path: Path
) -> None:
    family = kind.partition("-")[0]
    if kind == "export-onnx":
        pytest.importorskip("tf2onnx")
    if kind in ("export-onnx", "export-savedmodel") and target == "outputs/exp":
        pytest.skip("replacing an export is shown by hf; one slow conversion each is enough")
    root = Path(shutil.copytree(template, tmp_path / "tree"))
    before = snapshot(root)

    result = CliRunner().invoke(app, command(kind, root, root / target))
    after = snapshot(root)

    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    if target not in ALLOWED[family]:
        errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert result.exit_code == 1 and len(errors) == 1, result.output
        assert "Traceback" not in result.output
        assert changed == set()
        return
    assert result.exit_code == 0, result.output
    assert changed and all(under(p, target) for p in changed), sorted(changed)
    if family == "evaluate":
        # Files are only added (or its own earlier report replaced): nothing else is touched.
        replaced = {p for p in changed if p in before and not p.startswith("outputs/r/eval/")}
        assert replaced == set(), sorted(replaced)
    if family == "export":
        marker = (root / target / ".qa-finetune-export").read_text()
        assert marker == kind.removeprefix("export-") + "\n"
