"""Training end to end on a tiny random model: run directory, resume, guards, determinism."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sample_files import sample_data_path
from tiny_runs import tiny_run_config

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError

# Two epochs at a high rate and frequent checkpoints, kept at the end: resume and checkpoint
# tests need them (``lean_run`` is a run as it finishes by default).
TRAIN_DEFAULTS = {
    "epochs": 2,
    "learning_rate": 1e-3,
    "checkpoint_every_steps": 3,
    "keep_checkpoint": True,
}


def tiny_config(model_dir: Path, output_dir: Path, **train: Any) -> Config:
    return tiny_run_config(model_dir, output_dir, **{**TRAIN_DEFAULTS, **train})


@pytest.fixture(scope="module")
def finished_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from qa_finetune.training.trainer import train

    return train(tiny_config(tiny_model_dir, tmp_path_factory.mktemp("runs")))


@pytest.fixture(scope="module")
def lean_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run with the defaults: one weights format, its checkpoint removed."""
    from qa_finetune.training.trainer import train

    root = tmp_path_factory.mktemp("lean")
    return train(tiny_config(tiny_model_dir, root, keep_checkpoint=False))


def test_run_directory_describes_itself(finished_run: Path) -> None:
    for name in (
        "config.yaml",
        "metrics.json",
        "history.csv",
        "curves.png",
        "env.json",
        "prepare_report.json",
        "model/config.json",
        "model/model.safetensors",
        "model/tokenizer.json",
    ):
        assert (finished_run / name).is_file(), name
    metrics = json.loads((finished_run / "metrics.json").read_text())
    assert metrics["steps"] == 2 * math.ceil(metrics["train_windows"] / 8)  # 2 epochs
    assert 0 <= metrics["f1"] <= 100 and metrics["eval_loss"] > 0
    history = (finished_run / "history.csv").read_text().splitlines()
    assert history[0] == "epoch,step,minutes,loss,eval_loss,exact_match,f1" and len(history) == 3
    env = json.loads((finished_run / "env.json").read_text())
    assert env["seed"] == 42 and env["packages"]["tensorflow"]
    resolved = Config.from_dict(
        __import__("yaml").safe_load((finished_run / "config.yaml").read_text())
    )
    assert resolved.train.run_name == "tiny"


def test_a_finished_run_keeps_one_weights_file_and_no_checkpoint(
    lean_run: Path, finished_run: Path
) -> None:
    """model/ holds model.safetensors alone (no tf_model.h5), checkpoints/ is removed at the
    end (kept with train.keep_checkpoint), and what remains is the records and the model."""
    assert sorted(p.name for p in lean_run.iterdir()) == [
        "config.yaml",
        "curves.png",
        "env.json",
        "history.csv",
        "metrics.json",
        "model",
        "prepare_report.json",
        "training_data.json",
    ]
    assert (finished_run / "checkpoints" / "checkpoint").is_file()
    weights = {p.name for p in (lean_run / "model").iterdir()} & {
        "tf_model.h5",
        "model.safetensors",
        "pytorch_model.bin",
    }
    assert weights == {"model.safetensors"}


def test_the_kept_model_loads_and_answers_without_tf_weights(
    lean_run: Path, tmp_path: Path
) -> None:
    """ask, evaluate and export work from a run whose model/ has model.safetensors alone;
    export --format hf adds tf_model.h5, which transformers' TF loader reads alone."""
    from transformers import TFAutoModelForQuestionAnswering
    from typer.testing import CliRunner

    from qa_finetune.cli.app import app
    from qa_finetune.modeling.loading import load_qa_model

    kept = load_qa_model(lean_run / "model")
    runner = CliRunner()
    context = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."
    asked = runner.invoke(
        app, ["ask", "Who designed it?", "--context", context, "--model", str(lean_run)]
    )
    assert asked.exit_code == 0, asked.output
    assert "(score " in asked.stdout
    data = str(sample_data_path("validation"))
    report = str(tmp_path / "eval")
    evaluated = runner.invoke(
        app,
        [
            "evaluate",
            "-m",
            str(lean_run),
            "--data",
            data,
            "--max-samples",
            "2",
            "--report-dir",
            report,
        ],
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads((tmp_path / "eval" / "metrics.json").read_text())["total"] == 2
    exported = runner.invoke(
        app, ["export", "--model", str(lean_run), "--output", str(tmp_path / "hf")]
    )
    assert exported.exit_code == 0, exported.output
    assert (tmp_path / "hf" / "tf_model.h5").is_file()
    loaded = TFAutoModelForQuestionAnswering.from_pretrained(tmp_path / "hf", use_safetensors=False)
    for a, b in zip(kept.weights, loaded.weights, strict=True):
        assert a.shape == b.shape
        assert (a.numpy() == b.numpy()).all()


def test_resuming_a_finished_run_says_it_finished(lean_run: Path, tiny_model_dir: Path) -> None:
    from qa_finetune.training.trainer import train

    config = tiny_config(tiny_model_dir, lean_run.parent, keep_checkpoint=False)
    with pytest.raises(QAFinetuneError) as caught:
        train(config, resume=True)
    assert str(caught.value) == (
        f"nothing to resume in {lean_run}: the run finished (metrics.json) and its "
        "checkpoint was removed then; to train on from it, start a new run with "
        f"--init-from {lean_run}"
    )


def test_existing_run_is_not_overwritten(finished_run: Path, tiny_model_dir: Path) -> None:
    from qa_finetune.training.trainer import train

    before = (finished_run / "model" / "model.safetensors").read_bytes()
    with pytest.raises(QAFinetuneError, match="--overwrite"):
        train(tiny_config(tiny_model_dir, finished_run.parent))
    assert (finished_run / "model" / "model.safetensors").read_bytes() == before


def test_resume_without_checkpoint_is_an_error(tmp_path: Path, tiny_model_dir: Path) -> None:
    from qa_finetune.training.trainer import train

    with pytest.raises(QAFinetuneError, match="nothing to resume"):
        train(tiny_config(tiny_model_dir, tmp_path), resume=True)


def test_interrupted_run_resumes_to_the_same_total_steps(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.training import callbacks
    from qa_finetune.training.trainer import train

    original = callbacks.StepHooks.on_train_batch_end

    def interrupt_at_step_5(self: Any, batch: int, logs: Any = None) -> None:
        original(self, batch, logs)
        if self._step() == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(callbacks.StepHooks, "on_train_batch_end", interrupt_at_step_5)
    config = tiny_config(tiny_model_dir, tmp_path)
    with pytest.raises(KeyboardInterrupt):
        train(config)
    run_dir = tmp_path / "tiny"
    assert (run_dir / "checkpoints" / "checkpoint").is_file()
    assert not (run_dir / "metrics.json").exists()
    monkeypatch.setattr(callbacks.StepHooks, "on_train_batch_end", original)
    train(config, resume=True)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["steps"] == 2 * math.ceil(metrics["train_windows"] / 8)
    history = (run_dir / "history.csv").read_text().splitlines()
    assert len(history) == 3  # epoch 1 from the first process, epoch 2 after resuming


def test_same_seed_same_metrics(finished_run: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from qa_finetune.training.trainer import train

    again = train(tiny_config(tiny_model_dir, tmp_path))
    first = json.loads((finished_run / "metrics.json").read_text())
    second = json.loads((again / "metrics.json").read_text())
    for key in ("exact_match", "f1", "eval_loss", "train_loss"):
        assert first[key] == pytest.approx(second[key], rel=1e-5), key


def test_nan_guard_stops_and_names_the_step() -> None:
    from qa_finetune.training.callbacks import NanGuard

    class FakeModel:
        stop_training = False

    guard = NanGuard(lambda: 17)
    guard.set_model(FakeModel())  # type: ignore[arg-type]
    guard.on_train_batch_end(0, {"loss": 1.5})
    assert guard.bad_step is None
    guard.on_train_batch_end(1, {"loss": float("nan")})
    assert guard.bad_step == 17 and guard.model.stop_training


# A subprocess that starts TensorFlow with two logical CPUs (36 s): the multi-worker slow tests
# cover tf.distribute too, so it runs with them in `make test-slow`.
@pytest.mark.slow
def test_mirrored_strategy_over_two_logical_cpus(tiny_model_dir: Path, tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import json, os
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        import numpy as np
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from qa_finetune.modeling.loading import load_qa_model
        from pathlib import Path
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_training import tiny_config
        from qa_finetune.cli.logs import show_library_logs
        from qa_finetune.training.trainer import train
        show_library_logs()  # the summary table, as the CLI shows it
        before = load_qa_model(Path({str(tiny_model_dir)!r})).get_weights()
        config = tiny_config(Path({str(tiny_model_dir)!r}), Path({str(tmp_path)!r}),
                             strategy="mirrored", epochs=1)
        run = train(config)
        after = load_qa_model(run / "model").get_weights()
        changed = any(not np.allclose(a, b) for a, b in zip(before, after))
        metrics = json.loads((run / "metrics.json").read_text())
        covered = metrics["steps"] * 8 >= metrics["train_windows"]
        print("RESULT", changed, np.isfinite(metrics["train_loss"]), covered)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).parents[1],
    )
    assert "RESULT True True True" in result.stdout, result.stdout[-2000:] + result.stderr[-3000:]
    assert "2 replica" in result.stdout


def test_keep_model_last_saves_the_final_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    """keep_model=last writes the final weights and reports the final evaluation; exporting
    the last checkpoint gives those same weights."""
    import numpy as np
    from transformers import TFAutoModelForQuestionAnswering

    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.publish.export import export_run
    from qa_finetune.training.trainer import train

    config = tiny_config(
        tiny_model_dir, tmp_path, epochs=3, keep_model="last", keep_checkpoint=False
    )
    run_dir = train(config)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    with (run_dir / "history.csv").open(encoding="utf-8") as handle:
        history = list(csv.DictReader(handle))
    assert metrics["kept_model"] == "last"
    assert len(history) == 3
    assert metrics["f1"] == pytest.approx(float(history[-1]["f1"]))

    # The checkpoint went when the run finished: model/ holds the last weights, exported.
    assert not (run_dir / "checkpoints").exists()
    exported = export_run(run_dir, "hf", "latest")
    assert exported == run_dir / f"model-step-{metrics['steps']}"
    kept = load_qa_model(run_dir / "model")
    restored = TFAutoModelForQuestionAnswering.from_pretrained(exported, use_safetensors=False)
    base = load_qa_model(tiny_model_dir)
    pairs = list(zip(kept.trainable_weights, restored.trainable_weights, strict=True))
    for a, b in pairs:
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert any(
        not np.array_equal(a.numpy(), b.numpy())
        for a, b in zip(kept.trainable_weights, base.trainable_weights, strict=True)
    )
    with pytest.raises(QAFinetuneError, match="already exists"):
        export_run(run_dir, "hf", "latest")
    # --init-from RUN --init-checkpoint latest starts from model/: the last weights.
    from qa_finetune.runs.lookup import load_run_config
    from qa_finetune.training import init_from

    latest = init_from._weights(run_dir, load_run_config(run_dir), "latest")
    assert latest == (run_dir / "model", None)


def test_the_last_weights_of_a_run_that_kept_its_best_are_gone(
    lean_run: Path, tmp_path: Path
) -> None:
    """With its checkpoint removed, a run whose model/ holds an earlier step's weights has
    no last weights to start from or export: one line each, naming the setting."""
    import shutil

    from qa_finetune.publish.export import export_run
    from qa_finetune.runs.lookup import load_run_config
    from qa_finetune.training import init_from

    run_dir = tmp_path / "tiny"
    shutil.copytree(lean_run, run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics.update(kept_model="best", best_step=metrics["steps"] - 1)
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(QAFinetuneError) as caught:
        init_from._weights(run_dir, load_run_config(run_dir), "latest")
    assert str(caught.value) == (
        f"run {run_dir} has no checkpoint (removed when the run finished; train it with --set "
        "train.keep_checkpoint=true to keep it): use --init-checkpoint model (its model/)"
    )
    with pytest.raises(QAFinetuneError) as caught:
        export_run(run_dir, "hf", "latest")
    assert str(caught.value) == (
        f"{run_dir} finished and its checkpoint was removed then (its model/ holds its best "
        "weights, not its last): --checkpoint best exports model/; train with --set "
        "train.keep_checkpoint=true to keep the last weights"
    )


def test_export_needs_a_checkpoint(tmp_path: Path) -> None:
    from qa_finetune.publish.export import export_run

    with pytest.raises(QAFinetuneError, match="no training checkpoint"):
        export_run(tmp_path, "hf", "latest")


def test_unknown_keep_model_is_a_config_error() -> None:
    with pytest.raises(QAFinetuneError, match=r"train\.keep_model"):
        Config.from_dict({"train": {"keep_model": "newest"}})


def test_resume_bookkeeping(
    finished_run: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Options that change a resumed run are refused; resuming a finished run keeps its
    training time; stale partial checkpoints go; the resumed step is printed."""
    import shutil

    from qa_finetune.cli.logs import show_library_logs
    from qa_finetune.training.trainer import train

    show_library_logs()  # what the CLI prints
    run_dir = tmp_path / "tiny"
    shutil.copytree(finished_run, run_dir)
    before = json.loads((run_dir / "metrics.json").read_text())
    stale = run_dir / "checkpoints" / f"ckpt-{before['steps'] + 1}_temp"
    stale.mkdir()
    (stale / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"\0" * 64)
    config = tiny_config(tiny_model_dir, tmp_path)
    with pytest.raises(QAFinetuneError, match=r"would change it: train\.epochs \(2\.0 -> 3\.0\)"):
        train(config, resume=True, requested={"train": {"epochs": 3, "run_name": "tiny"}})
    assert not capsys.readouterr().out

    train(config, resume=True, requested={"train": {"run_name": "tiny", "epochs": 2}})
    after = json.loads((run_dir / "metrics.json").read_text())
    steps = before["steps"]
    assert f"resuming from step {steps} of {steps}" in capsys.readouterr().out
    assert after["steps"] == steps
    assert before["train_seconds"] > 0
    assert after["train_seconds"] >= before["train_seconds"]
    assert not stale.exists()


def _damage(folder: Path, kind: str) -> str:
    """Damage the latest checkpoint in ``folder`` one way; returns the file named in the error."""
    index = next(folder.glob("ckpt-*.index"))
    data = next(folder.glob("ckpt-*.data-*"))
    state = next(folder.glob("state-*.json"))
    if kind == "garbled-index-file":
        (folder / "checkpoint").write_text("model_checkpoint_path: \x00\x01 not a proto {")
        return str(folder / "checkpoint")
    if kind == "missing-files":
        index.unlink()
        return str(index.with_suffix(""))
    if kind == "truncated-data":
        data.write_bytes(data.read_bytes()[:100])
        return str(index.with_suffix(""))
    if kind == "zeroed-index":
        index.write_bytes(bytes(index.stat().st_size))
        return str(index.with_suffix(""))
    if kind == "missing-state":
        state.unlink()
        return str(state)
    state.write_text("{not json")
    return str(state)


@pytest.mark.parametrize(
    "kind",
    [
        "garbled-index-file",
        "corrupt-state",
        # The same path through TensorFlow's reader, a model load each: slow.
        pytest.param("missing-files", marks=pytest.mark.slow),
        pytest.param("truncated-data", marks=pytest.mark.slow),
        pytest.param("zeroed-index", marks=pytest.mark.slow),
        pytest.param("missing-state", marks=pytest.mark.slow),
    ],
)
def test_damaged_checkpoint_on_resume_names_the_file_and_fix(
    finished_run: Path, tiny_model_dir: Path, tmp_path: Path, kind: str
) -> None:
    import shutil

    from qa_finetune.training.trainer import train

    run_dir = tmp_path / "tiny"
    shutil.copytree(finished_run, run_dir)
    named = _damage(run_dir / "checkpoints", kind)
    with pytest.raises(QAFinetuneError) as info:
        train(tiny_config(tiny_model_dir, tmp_path), resume=True)
    message = str(info.value)
    assert named in message and "--overwrite" in message and "\n" not in message
    assert (run_dir / "model" / "model.safetensors").is_file()  # nothing else was touched


@pytest.mark.slow
def test_train_loss_covers_an_epoch_resumed_midway(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted mid-epoch and resumed, the run reports the mean loss of the whole epoch's
    batches (both processes), not the loss of the batches after resuming alone."""
    from qa_finetune.training import callbacks
    from qa_finetune.training.trainer import train

    original = callbacks.StepHooks.on_train_batch_end
    per_batch: dict[int, float] = {}  # step -> that batch's own loss
    previous_mean = [0.0]
    stop_at = [0]

    def record(self: Any, batch: int, logs: Any = None) -> None:
        # Keras reports the running mean over this fit call's batches; undo it per batch.
        mean = float(logs["loss"])
        per_batch[self._step()] = (batch + 1) * mean - batch * (previous_mean[0] if batch else 0)
        previous_mean[0] = mean
        original(self, batch, logs)
        if self._step() == stop_at[0]:
            raise KeyboardInterrupt

    config = tiny_config(tiny_model_dir, tmp_path, checkpoint_every_steps=1)
    monkeypatch.setattr(callbacks.StepHooks, "on_train_batch_end", record)
    from qa_finetune.training.prepare import prepare
    from qa_finetune.training.schedule import Schedule

    steps_per_epoch = Schedule.of(config, len(prepare(config).train)).steps_per_epoch
    assert steps_per_epoch >= 3  # so that the interruption falls inside the second epoch
    stop_at[0] = steps_per_epoch + 2
    with pytest.raises(KeyboardInterrupt):
        train(config)
    stop_at[0] = 0
    run_dir = train(config, resume=True)
    with (run_dir / "history.csv").open(encoding="utf-8") as handle:
        history = list(csv.DictReader(handle))
    second = [per_batch[s] for s in range(steps_per_epoch + 1, 2 * steps_per_epoch + 1)]
    assert float(history[1]["loss"]) == pytest.approx(sum(second) / len(second), rel=1e-5)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["train_loss"] == pytest.approx(sum(second) / len(second), rel=1e-5)
