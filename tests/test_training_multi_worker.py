"""Two ``qa-finetune train`` workers on 127.0.0.1 (MultiWorkerMirroredStrategy, a TF_CONFIG
each) against a one-worker run of the same seed and global batch; then both killed and
resumed from the chief's last checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_training_options import _free_port, tiny_config

pytestmark = pytest.mark.slow

# The same weights after the same steps: validation loss (no dropout) agrees closely. Training
# losses also differ by dropout, whose masks come from other random streams on two workers.
EVAL_LOSS_TOLERANCE = 1e-3
TRAIN_LOSS_TOLERANCE = 0.05


def _command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "qa_finetune.cli", "train", "--config", str(config), *extra]


def _env(tf_config: dict[str, Any] | None) -> dict[str, str]:
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def _start_workers(config: Path, logs: Path, *extra: str) -> list[subprocess.Popen[str]]:
    hosts = [f"127.0.0.1:{_free_port()}" for _ in range(2)]
    workers = []
    for index in range(2):
        tf_config = {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": index}}
        log = (logs / f"worker-{index}.log").open("a", encoding="utf-8")
        workers.append(
            subprocess.Popen(
                _command(config, "--set", "train.strategy=multi_worker", *extra),
                env=_env(tf_config),
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return workers


def _wait(workers: list[subprocess.Popen[str]], logs: Path) -> None:
    for index, worker in enumerate(workers):
        code = worker.wait(timeout=600)
        assert code == 0, (logs / f"worker-{index}.log").read_text()[-3000:]


def _write_config(model_dir: Path, folder: Path, run_name: str, **train: Any) -> Path:
    config = tiny_config(model_dir, folder / "runs", run_name=run_name, **train)
    path = folder / f"{run_name}.yaml"
    path.write_text(config.to_yaml(), encoding="utf-8")
    return path


def test_two_workers_match_one_and_only_the_chief_writes(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    single = _write_config(tiny_model_dir, tmp_path, "single", epochs=2)
    done = subprocess.run(
        _command(single), env=_env(None), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    pair = _write_config(tiny_model_dir, tmp_path, "pair", epochs=2)
    workers = _start_workers(pair, tmp_path)
    _wait(workers, tmp_path)

    # Only the chief's run directory exists, complete; the other worker left nothing.
    assert sorted(p.name for p in runs.iterdir()) == ["features", "pair", "single"]
    for name in ("model", "metrics.json", "history.csv", "curves.png", "env.json", "config.yaml"):
        assert (runs / "pair" / name).exists(), name
    one = json.loads((runs / "single" / "metrics.json").read_text())
    two = json.loads((runs / "pair" / "metrics.json").read_text())
    assert two["steps"] == one["steps"]
    assert abs(two["train_loss"] - one["train_loss"]) < TRAIN_LOSS_TOLERANCE, (one, two)
    assert abs(two["eval_loss"] - one["eval_loss"]) < EVAL_LOSS_TOLERANCE, (one, two)
    # The progress lines report the cluster's mean loss, as the history does.
    last = [
        line for line in (tmp_path / "worker-0.log").read_text().splitlines() if "step 18/" in line
    ]
    assert last and abs(float(last[-1].split()[3]) - two["train_loss"]) < 1e-3, last


def test_killed_workers_resume_from_the_chief_checkpoint(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    config = _write_config(tiny_model_dir, tmp_path, "killed", epochs=8, checkpoint_every_steps=2)
    workers = _start_workers(config, tmp_path)
    index = runs / "killed" / "checkpoints" / "checkpoint"
    deadline = time.time() + 600
    while not index.exists() and time.time() < deadline:
        assert all(w.poll() is None for w in workers), (tmp_path / "worker-0.log").read_text()
        time.sleep(0.05)
    # One worker dies; the other cannot go on without it (TensorFlow needs the whole cluster
    # restarted), so both are stopped and both restarted with --resume.
    workers[1].send_signal(signal.SIGKILL)
    workers[0].send_signal(signal.SIGKILL)
    for worker in workers:
        worker.wait(timeout=60)
    restarted = _start_workers(config, tmp_path, "--resume")
    _wait(restarted, tmp_path)
    resumed = []
    for number in range(2):
        log = (tmp_path / f"worker-{number}.log").read_text()
        lines = [line for line in log.splitlines() if line.startswith("resuming from step")]
        assert lines, log[-3000:]
        resumed.append(int(lines[-1].split()[3]))
    # Both continue from the chief's last checkpoint (every 2 steps), not from the start.
    assert resumed[0] == resumed[1] and resumed[0] % 2 == 0 and 0 < resumed[0] < 72, resumed
    metrics = json.loads((runs / "killed" / "metrics.json").read_text())
    assert (metrics["steps"], metrics["epochs"]) == (72, 8)
    assert sorted(p.name for p in runs.iterdir()) == ["features", "killed"]
