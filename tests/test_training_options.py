"""Training options end to end on the tiny model: early stopping, evaluation and step
limits, the NaN guard, and the multi-worker strategy read from TF_CONFIG."""

from __future__ import annotations

import csv
import json
import logging
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tiny_runs import tiny_run_config

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError


def tiny_config(model_dir: Path, output_dir: Path, **train: Any) -> Config:
    return tiny_run_config(
        model_dir, output_dir, train_samples=24, **{"run_name": "options", **train}
    )


def _history(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "history.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_eval_every_steps_and_early_stopping(
    tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from qa_finetune.training.trainer import train

    # A learning rate this small leaves the scores exactly where they started, so no later
    # evaluation improves on the first: each counts against the patience of 2, and the flat
    # curve keeps the latest step.
    config = tiny_config(
        tiny_model_dir,
        tmp_path,
        epochs=10,
        learning_rate=1e-12,
        eval_every_steps=1,
        early_stopping_patience=2,
        checkpoint_every_steps=None,
    )
    with caplog.at_level(logging.INFO, logger="qa_finetune"):
        run_dir = train(config)
    assert [int(row["step"]) for row in _history(run_dir)] == [1, 2, 3]
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["steps"] == 3
    assert metrics["best_step"] == 3
    messages = [record.getMessage() for record in caplog.records]
    assert (
        f"kept: step 3, the last, with the best held-out F1 ({metrics['f1']:.2f} on "
        f"{metrics['eval_examples']} questions)"
    ) in messages


def test_max_steps_caps_the_run(tiny_model_dir: Path, tmp_path: Path) -> None:
    from qa_finetune.training.trainer import train

    run_dir = train(tiny_config(tiny_model_dir, tmp_path, epochs=50, max_steps=2))
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["steps"] == 2
    # The step limit ends the run mid-epoch: it is still evaluated once, at its last step.
    assert [int(row["step"]) for row in _history(run_dir)] == [2]


def test_nan_loss_stops_with_a_clear_error_and_keeps_the_last_good_checkpoint(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tensorflow as tf

    from qa_finetune.training import callbacks
    from qa_finetune.training.trainer import train

    # The loss turns NaN at step 3, as a diverging run's would; the guard must see it as is.
    original = callbacks.NanGuard.on_train_batch_end

    def diverge_at_step_3(self: Any, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self._step() == 3:
            logs = {**(logs or {}), "loss": float("nan")}
        original(self, batch, logs)

    monkeypatch.setattr(callbacks.NanGuard, "on_train_batch_end", diverge_at_step_3)
    config = tiny_config(tiny_model_dir, tmp_path, epochs=5, checkpoint_every_steps=2)
    with pytest.raises(QAFinetuneError, match=r"NaN/inf at step 3: lower the learning rate"):
        train(config)
    latest = tf.train.latest_checkpoint(str(tmp_path / "options" / "checkpoints"))
    assert latest is not None and latest.endswith("ckpt-2")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_multi_worker_strategy_reads_tf_config() -> None:
    # A one-worker cluster: the strategy joins it through TF_CONFIG, as each machine of a
    # real cluster does. A fresh process, because collective ops are set up once per process.
    tf_config = {
        "cluster": {"worker": [f"127.0.0.1:{_free_port()}"]},
        "task": {"type": "worker", "index": 0},
    }
    script = textwrap.dedent(
        """
        import json, os
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        import tensorflow as tf
        from qa_finetune.modeling.loading import make_strategy
        strategy = make_strategy("multi_worker")
        resolver = strategy.cluster_resolver
        print(json.dumps({
            "multi_worker": isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy),
            "replicas": strategy.num_replicas_in_sync,
            "task": [resolver.task_type, resolver.task_id],
            "workers": resolver.cluster_spec().as_dict()["worker"],
        }))
        """
    )
    env = {**__import__("os").environ, "TF_CONFIG": json.dumps(tf_config)}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    facts = json.loads(result.stdout.strip().splitlines()[-1])
    assert facts["multi_worker"]
    assert facts["replicas"] == 1
    assert facts["task"] == ["worker", 0]
    assert facts["workers"] == tf_config["cluster"]["worker"]


@pytest.mark.parametrize(
    ("train", "windows", "shown"),
    [
        ({"epochs": 1, "min_steps": 150}, 24, "75 (train.min_steps 150 raises train.epochs 1)"),
        ({"epochs": 3, "max_steps": 4}, 24, "2 (train.max_steps 4 caps train.epochs 3)"),
        ({"epochs": 2, "min_steps": 3}, 24, "2"),
    ],
)
def test_the_start_shows_the_epochs_its_steps_make(
    train: dict[str, Any], windows: int, shown: str
) -> None:
    from qa_finetune.training.results import planned_epochs
    from qa_finetune.training.schedule import Schedule

    # Batches of 16: 24 windows make 2 steps an epoch.
    config = Config.from_dict({"train": {"batch_size": 16, **train}})
    assert planned_epochs(config, Schedule.of(config, windows)) == shown
