"""Resume and damaged inputs: a validation killed at the last step, a full disk, a features
cache missing a part, data changed under the same path, a deleted checkpoint index."""

from __future__ import annotations

import csv
import errno
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sample_files import sample_data_path
from tiny_runs import tiny_run_config

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError


def _config(
    model_dir: Path, output_dir: Path, data_dir: Path | None = None, **train: Any
) -> Config:
    """The tiny run: one epoch, a checkpoint at every step; data copied to ``data_dir``."""
    # Checkpoints kept at the end (train.keep_checkpoint): these tests look at them.
    train = {"keep_checkpoint": True, **train}
    config = tiny_run_config(model_dir, output_dir, epochs=1, checkpoint_every_steps=1, **train)
    if data_dir is None:
        return config
    values = config.to_dict()
    for split in ("train", "validation"):
        if not (data_dir / f"{split}.json").is_file():
            data_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(sample_data_path(split), data_dir / f"{split}.json")
        values["data"][f"{split}_file"] = str(data_dir / f"{split}.json")
    return Config.from_dict(values)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def finished(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Config:
    """A finished tiny run trained on its own copy of the data files (tests restore them)."""
    from qa_finetune.training.trainer import train

    root = tmp_path_factory.mktemp("finished")
    config = _config(tiny_model_dir, root / "runs", root / "data")
    train(config)
    return config


def _run_dir(config: Config) -> Path:
    return Path(config.train.output_dir) / str(config.train.run_name)


def test_validation_killed_at_the_last_step_is_redone_on_resume(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.training.trainer import Trainer, train

    def killed(*args: Any) -> bool:
        raise KeyboardInterrupt

    config = _config(tiny_model_dir, tmp_path)
    run_dir = _run_dir(config)
    original = Trainer.validate
    monkeypatch.setattr(Trainer, "validate", killed)
    with pytest.raises(KeyboardInterrupt):
        train(config)
    # The last step's checkpoint was saved before the epoch's validation began.
    [state_file] = (run_dir / "checkpoints").glob("state-*.json")
    final_step = int(state_file.stem.split("-")[1])
    state = json.loads(state_file.read_text())
    assert state["history"] == []
    assert not (run_dir / "history.csv").exists() and not (run_dir / "metrics.json").exists()

    monkeypatch.setattr(Trainer, "validate", original)
    train(config, resume=True)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    with (run_dir / "history.csv").open(encoding="utf-8") as handle:
        [row] = list(csv.DictReader(handle))
    assert int(row["step"]) == final_step == metrics["steps"] == metrics["best_step"]
    for key in ("exact_match", "f1", "eval_loss"):
        assert float(row[key]) == pytest.approx(metrics[key]) and metrics[key] is not None
    # The epoch's loss comes from the checkpoint: the batches trained before the kill.
    assert state["epoch_loss_batches"] == final_step
    epoch_loss = state["epoch_loss_sum"] / state["epoch_loss_batches"]
    assert float(row["loss"]) == pytest.approx(epoch_loss) == metrics["train_loss"]
    assert (run_dir / "curves.png").stat().st_size > 0
    # The validation is checkpointed: a second resume has nothing left to do.
    saved = json.loads((run_dir / "checkpoints" / f"state-{final_step}.json").read_text())
    assert [r["step"] for r in saved["history"]] == [final_step]


def _full_disk_errors() -> dict[str, Callable[[str], BaseException]]:
    import tensorflow as tf

    def message(path: str) -> str:
        return f"{path}/part-00000-of-00001.data-00000-of-00001.tempstate1; No space left on device"

    return {
        # What TensorFlow raises for ENOSPC while writing a checkpoint.
        "resource-exhausted": lambda path: tf.errors.ResourceExhaustedError(
            None, None, message(path)
        ),
        "internal": lambda path: tf.errors.InternalError(None, None, message(path)),
        "os-error": lambda path: OSError(errno.ENOSPC, "No space left on device", path),
    }


@pytest.mark.parametrize("kind", ["resource-exhausted", "internal", "os-error"])
def test_full_disk_is_named_and_the_partial_checkpoint_goes(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    import tensorflow as tf

    from qa_finetune.training.trainer import train

    original = tf.train.CheckpointManager.save

    def save(self: Any, checkpoint_number: int | None = None, **kwargs: Any) -> Any:
        if checkpoint_number == 1:
            return original(self, checkpoint_number=checkpoint_number, **kwargs)
        # The disk fills while the second checkpoint is written.
        temp = Path(self.directory) / f"ckpt-{checkpoint_number}_temp"
        temp.mkdir()
        (temp / "part-00000-of-00001.data-00000-of-00001.tempstate1").write_bytes(b"\0" * 4096)
        raise _full_disk_errors()[kind](str(temp))

    monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
    config = _config(tiny_model_dir, tmp_path)
    run_dir = _run_dir(config)
    with pytest.raises(QAFinetuneError) as info:
        train(config)
    assert str(info.value) == (
        f"no space left on {run_dir}: free space or choose another --output-dir"
    )
    # The first checkpoint is whole; nothing of the second is left to keep the disk full.
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "checkpoint",
        "ckpt-1.data-00000-of-00001",
        "ckpt-1.index",
        "state-1.json",
    ]


@pytest.mark.parametrize("part", ["validation_examples", "validation", "train"])
def test_features_cache_missing_a_part_is_rebuilt(
    tiny_model_dir: Path,
    tmp_path: Path,
    part: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from qa_finetune.cli.logs import show_library_logs
    from qa_finetune.training.prepare import prepare

    show_library_logs()  # what the CLI prints

    config = _config(tiny_model_dir, tmp_path)
    first = prepare(config)
    shutil.rmtree(first.cache_dir / part)
    capsys.readouterr()
    again = prepare(config)
    assert f"{first.cache_dir} is incomplete (no {part}/): rebuilding it" in capsys.readouterr().err
    assert not again.reused and again.cache_dir == first.cache_dir
    assert (first.cache_dir / part).is_dir()
    assert len(again.validation_examples) == first.report["validation"]["examples"] == 8
    assert len(again.validation) == len(first.validation)
    assert len(again.train) == len(first.train)


def test_resume_refuses_a_data_file_changed_under_the_same_path(
    finished: Config, tiny_model_dir: Path
) -> None:
    from qa_finetune.training.trainer import train

    run_dir = _run_dir(finished)
    train_file = Path(str(finished.data.train_file))
    root = Path(finished.train.output_dir)
    before = _snapshot(root)
    original = train_file.read_bytes()
    # The same file with its last article only: a different data set under the same name.
    articles = json.loads(original)
    articles["data"] = articles["data"][-1:]
    try:
        train_file.write_text(json.dumps(articles), encoding="utf-8")
        with pytest.raises(QAFinetuneError) as info:
            train(finished, resume=True)
    finally:
        train_file.write_bytes(original)
    assert str(info.value) == (
        f"{train_file} changed since {run_dir} started (its content is not the data the "
        "checkpoints were trained on): restore the file to continue with --resume, or start a "
        "new run (--run-name NEW or --overwrite)"
    )
    assert _snapshot(root) == before  # no run file touched, no features built
    env = json.loads((run_dir / "env.json").read_text())
    assert [name for name, _ in env["data_files"]["train"]] == [str(train_file)]


def test_deleted_checkpoint_index_is_rebuilt_on_resume(
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from qa_finetune.cli.logs import show_library_logs
    from qa_finetune.training import callbacks
    from qa_finetune.training.trainer import train

    show_library_logs()  # what the CLI prints

    original = callbacks.StepHooks.on_train_batch_end

    def interrupt_at_step_1(self: Any, batch: int, logs: Any = None) -> None:
        original(self, batch, logs)
        if self._step() == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(callbacks.StepHooks, "on_train_batch_end", interrupt_at_step_1)
    config = _config(tiny_model_dir, tmp_path)
    with pytest.raises(KeyboardInterrupt):
        train(config)
    monkeypatch.setattr(callbacks.StepHooks, "on_train_batch_end", original)
    folder = _run_dir(config) / "checkpoints"
    (folder / "checkpoint").unlink()
    files = _snapshot(folder)
    assert sorted(files) == ["ckpt-1.data-00000-of-00001", "ckpt-1.index", "state-1.json"]

    # A plain train must not take the intact checkpoint for an abandoned run's scaffolding.
    with pytest.raises(QAFinetuneError, match="exists: pass --overwrite"):
        train(config)
    assert _snapshot(folder) == files

    capsys.readouterr()
    train(config, resume=True)
    steps = json.loads((_run_dir(config) / "metrics.json").read_text())["steps"]
    assert f"resuming from step 1 of {steps}" in capsys.readouterr().out
    # The rebuilt index let the manager rotate checkpoint 1 away as usual.
    assert sorted(p.name for p in folder.iterdir()) == [
        "checkpoint",
        f"ckpt-{steps}.data-00000-of-00001",
        f"ckpt-{steps}.index",
        f"state-{steps}.json",
    ]
    assert f'model_checkpoint_path: "ckpt-{steps}"' in (folder / "checkpoint").read_text()


def test_missing_index_without_a_complete_checkpoint_is_one_line(tmp_path: Path) -> None:
    from qa_finetune.runs import directory as rundir
    from qa_finetune.training.checkpoints import recover_index

    folder = tmp_path / "run" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / "ckpt-4.index").write_bytes(b"index")
    (folder / "ckpt-4.data-00000-of-00002").write_bytes(b"data")  # shard 1 of 2 is missing
    (folder / "state-4.json").write_text("{}")
    assert rundir.has_checkpoint(tmp_path / "run")
    with pytest.raises(QAFinetuneError) as info:
        recover_index(tmp_path / "run", "FIX")
    assert str(info.value) == (
        f"{folder} has no checkpoint index and no complete checkpoint (ckpt-N.index, its "
        "ckpt-N.data-* files and state-N.json): FIX"
    )
    assert sorted(p.name for p in folder.iterdir()) == [
        "ckpt-4.data-00000-of-00002",
        "ckpt-4.index",
        "state-4.json",
    ]


def test_full_disk_while_preparing_features_is_named_and_leaves_no_staging(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.training import feature_cache
    from qa_finetune.training.prepare import prepare

    def save_dataset(dataset: Any, target: Path) -> None:
        target.mkdir(parents=True)
        (target / "data-00000-of-00001.arrow").write_bytes(b"\0" * 4096)
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    monkeypatch.setattr(feature_cache, "save_dataset", save_dataset)
    config = _config(tiny_model_dir, tmp_path)
    with pytest.raises(QAFinetuneError) as info:
        prepare(config)
    assert str(info.value) == (
        f"no space left on {tmp_path / 'features'}: free space or choose another --output-dir"
    )
    assert not (tmp_path / "features").exists()  # made for this build, gone with it
