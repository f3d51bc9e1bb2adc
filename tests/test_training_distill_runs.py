"""``train.method: distill`` end to end: a student of a tiny teacher run trains into an ordinary
run directory (``ask``, ``evaluate``, the model card and ``--init-from`` take it), a second
student and a resumed one reuse the teacher's cached logits, and each bad setting is one line
with nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from sample_files import sample_data_path
from tiny_runs import tiny_run_config
from typer.testing import CliRunner

from qa_finetune.cli.app import app

CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."


@pytest.fixture(scope="module")
def teacher_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny standard run (a high rate moves its head away from the random one)."""
    from qa_finetune.training.trainer import train

    root = tmp_path_factory.mktemp("distill")
    return train(tiny_run_config(tiny_model_dir, root, run_name="teacher", learning_rate=1e-2))


def _student(teacher: Path, run_name: str, **train: Any) -> Any:
    """A distillation of the teacher run, named by its run name under the same output root."""
    return tiny_run_config(
        Path(train.pop("model", teacher / "model")),
        teacher.parent,
        run_name=run_name,
        method="distill",
        teacher=teacher.name,
        **train,
    )


def _counting_teacher_runs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    from qa_finetune.training import teacher_logits

    calls: list[Path] = []
    original = teacher_logits._run_teacher

    def run(teacher: Any, *args: Any) -> Any:
        calls.append(teacher.model_dir)
        return original(teacher, *args)

    monkeypatch.setattr(teacher_logits, "_run_teacher", run)
    return calls


class _Batches:
    """A callback passed in: counts the batches trained."""

    def __new__(cls) -> Any:
        import tf_keras

        class Counter(tf_keras.callbacks.Callback):
            def __init__(self) -> None:
                super().__init__()
                self.batches = 0

            def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                self.batches += 1

        return Counter()


def test_a_student_of_chosen_layers_is_an_ordinary_run(
    teacher_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.publish.model_card import build_model_card
    from qa_finetune.training.trainer import train

    calls = _counting_teacher_runs(monkeypatch)
    counter = _Batches()
    run_dir = train(_student(teacher_run, "student", student_layers=[1]), callbacks=[counter])
    assert calls == [teacher_run / "model"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert counter.batches == metrics["steps"] > 0
    assert metrics["method"] == "distill" and metrics["student_layers"] == [1]
    assert metrics["teacher"]["run"] == "teacher" and len(metrics["teacher"]["sha256"]) == 64
    recorded = yaml.safe_load((run_dir / "config.yaml").read_text())["train"]
    assert (recorded["method"], recorded["teacher"], recorded["student_layers"]) == (
        "distill",
        "teacher",
        [1],
    )
    model_config = json.loads((run_dir / "model" / "config.json").read_text())
    assert model_config["num_hidden_layers"] == 1
    card = build_model_card(run_dir, "me/student")
    assert "Distilled from the teacher `teacher` (training method `distill`" in card
    assert "layers [1]" in card

    ask = ["ask", "Who designed the bridge?", "--context", CONTEXT, "--model", str(run_dir)]
    result = CliRunner().invoke(app, [*ask, "--json"])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout.strip().splitlines()[-1])) >= {"answer", "score"}
    evaluate = ["evaluate", "--model", str(run_dir), "--data", str(sample_data_path("validation"))]
    result = CliRunner().invoke(app, evaluate)
    assert result.exit_code == 0, result.output
    assert (run_dir / "eval" / "metrics.json").is_file()

    # A run may start from the student as from any run.
    from qa_finetune.training import init_from
    from qa_finetune.training.run_plan import plan_run

    child = tiny_run_config(Path("unused"), teacher_run.parent, run_name="child")
    child = child.from_dict({**child.to_dict(), "model": {"init_from": str(run_dir)}})
    plan = plan_run(child, teacher_run.parent / "child")
    assert plan.parent is not None and plan.parent.run_dir == run_dir
    assert init_from.load_parent_model(plan.parent).config.num_hidden_layers == 1


def test_a_second_student_and_a_resumed_one_reuse_the_teachers_logits(
    teacher_run: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.training.trainer import Trainer

    calls = _counting_teacher_runs(monkeypatch)
    config = _student(teacher_run, "second", model=tiny_model_dir, checkpoint_every_steps=1)
    # The same tokenizer, windows and data as the first student: the same features, so the
    # logits the first student cached serve this one (when this test runs alone, its first
    # run computes them).
    cached = list((teacher_run.parent / "features").glob("*/teacher-logits/*/start.npy"))
    original = Trainer.save

    def killed(self: Trainer, at_step: int) -> None:
        original(self, at_step)
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        Trainer(config).train()
    assert calls == ([] if cached else [teacher_run / "model"])
    before_resume = list(calls)
    monkeypatch.setattr(Trainer, "save", original)
    run_dir = Trainer(config, resume=True).train()
    assert calls == before_resume
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["method"] == "distill" and metrics["student_layers"] is None
    assert metrics["steps"] > 1  # the resumed run trained past the killed one's checkpoint


def _tokenizer_teacher(family_model_dir: Any, tmp_path: Path) -> str:
    return str(family_model_dir("roberta"))


def _window_teacher(tiny_model_dir: Path, tmp_path: Path) -> str:
    folder = tmp_path / "long-windows"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "qa_config.json").write_text(json.dumps({"max_length": 256, "stride": 64}))
    return str(folder)


def _bare_encoder(tiny_model_dir: Path, tmp_path: Path) -> str:
    from transformers import AutoConfig, AutoTokenizer, TFBertModel

    folder = tmp_path / "encoder"
    model = TFBertModel(AutoConfig.from_pretrained(str(tiny_model_dir)))
    model(model.dummy_inputs)
    model.save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(str(tiny_model_dir)).save_pretrained(str(folder))
    return str(folder)


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (
            ["train.method=prune"],
            "'train.method': must be standard, distill or shared_norm, got 'prune'",
        ),
        (["train.method=distill"], "'train.teacher': is not set"),
        (["train.method=distill", "train.teacher=nowhere"], "unknown teacher 'nowhere'"),
        (["train.method=distill", "train.teacher={tokenizer}"], "has another tokenizer"),
        (["train.method=distill", "train.teacher={windows}"], "set --max-length 256 --stride 64"),
        (["train.method=distill", "train.teacher={encoder}"], "no trained question-answering"),
        (
            ["train.method=distill", "train.teacher={model}", "train.student_layers=[0, 2]"],
            "names layer 2 (counted from 0), but the teacher has 2 encoder layers",
        ),
        (
            ["train.method=distill", "train.teacher={tokenizer}", "train.student_layers=1"],
            "(another model) is not used: drop --model",
        ),
        (
            [
                "train.method=distill",
                "train.teacher={model}",
                "train.student_layers=1",
                "model.init_from=elsewhere",
            ],
            "model.init_from from another run's weights: choose one",
        ),
    ],
    ids=[
        "method",
        "no-teacher",
        "unknown",
        "tokenizer",
        "windows",
        "encoder",
        "layers",
        "layers-and-model",
        "layers-and-init-from",
    ],
)
def test_each_bad_distillation_is_one_line_and_writes_nothing(
    settings: list[str],
    words: str,
    tiny_model_dir: Path,
    family_model_dir: Any,
    tmp_path: Path,
) -> None:
    teachers = {
        "tokenizer": lambda: _tokenizer_teacher(family_model_dir, tmp_path),
        "windows": lambda: _window_teacher(tiny_model_dir, tmp_path),
        "encoder": lambda: _bare_encoder(tiny_model_dir, tmp_path),
        "model": lambda: str(tiny_model_dir),
    }
    for name, make in teachers.items():
        settings = [s.replace(f"{{{name}}}", make()) if f"{{{name}}}" in s else s for s in settings]
    output = tmp_path / "outputs"
    args = ["train", "--model", str(tiny_model_dir), "--output-dir", str(output)]
    args += ["--train-file", str(sample_data_path("train")), "--max-length", "128"]
    args += ["--stride", "32", "--run-name", "student"]
    for setting in settings:
        args += ["--set", setting]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: ") and words in line
    assert not output.exists() or list(output.iterdir()) == []
