"""Each epoch's training data: negative-window sampling, replay of general-domain data, and
the monitor files scored at each validation, through a real tiny run's ``Trainer``."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sample_files import sample_data_path
from tiny_runs import recording_trainer, tiny_run_config

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError

FRACTION = 0.25


def _domain_config(model_dir: Path, root: Path, **train: Any) -> Config:
    """The tiny run with one negative window per question, a quarter of each epoch replayed
    from the validation sample, and two monitor files."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sample_data_path("validation"), data / "squad-dev.json")
    shutil.copyfile(sample_data_path("train"), data / "held out.json")
    shutil.copyfile(sample_data_path("validation"), data / "general.json")
    values = tiny_run_config(model_dir, root / "runs", train_samples=32, **train).to_dict()
    values["data"].update(replay_file=str(data / "general.json"), replay_fraction=FRACTION)
    values["preprocess"]["negative_windows"] = 1
    values["train"]["monitor_files"] = f"{data / 'squad-dev.json'},{data / 'held out.json'}"
    return Config.from_dict(values)


def _prepared_trainer(config: Config, **kwargs: Any) -> Any:
    """A Trainer through its checks and data phases (no model built, nothing trained), under
    a run name of its own."""
    from qa_finetune.training.trainer import Trainer

    values = config.to_dict()
    values["train"]["run_name"] = "probe"
    trainer = Trainer(Config.from_dict(values), **kwargs)
    trainer.check()
    trainer.prepare_data()
    return trainer


def _windows(dataset: Any) -> list[tuple[tuple[int, ...], int, int]]:
    """Each window a batched dataset feeds: its unpadded token ids and its labels."""
    found = []
    for batch in dataset.as_numpy_iterator():
        for ids, mask, start, end in zip(
            batch["input_ids"],
            batch["attention_mask"],
            batch["start_positions"],
            batch["end_positions"],
            strict=True,
        ):
            found.append((tuple(ids[mask.astype(bool)].tolist()), int(start), int(end)))
    return found


def _rows(features: Any) -> list[tuple[tuple[int, ...], int, int]]:
    columns = features.select_columns(["input_ids", "start_positions", "end_positions"])
    return [(tuple(r["input_ids"]), r["start_positions"], r["end_positions"]) for r in columns]


@pytest.fixture(scope="module")
def domain_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two epochs of the tiny run with sampling, replay and monitors; its trainer."""
    from qa_finetune.training.trainer import Trainer

    config = _domain_config(tiny_model_dir, tmp_path_factory.mktemp("domain"), epochs=2)
    trainer = Trainer(config)
    trainer.train()
    return trainer


def test_defaults_feed_the_same_batches_as_before(tiny_model_dir: Path, tmp_path: Path) -> None:
    from qa_finetune.training.tf_data import make_dataset

    config = tiny_run_config(tiny_model_dir, tmp_path)
    trainer = _prepared_trainer(config)
    prepared = trainer.prepared
    assert trainer.windows_per_epoch == len(prepared.train)
    assert prepared.replay is None and prepared.monitors == {}
    for epoch in (0, 1):
        # The epoch's batches as the run made them before sampling and replay existed.
        before = make_dataset(
            prepared.train, prepared.tokenizer, 8, seed=config.train.seed + epoch, bucketing=True
        )
        assert _windows(trainer.epoch_dataset(epoch, 0, None)) == _windows(before)


def test_replay_is_its_fraction_of_every_epoch(domain_run: Any) -> None:
    windows = domain_run.epoch_windows
    train = domain_run.prepared.train
    batch = domain_run.config.train.batch_size
    replay_rows = set(_rows(domain_run.prepared.replay))
    for epoch in (0, 1):
        _, order = windows.epoch(epoch)
        replayed = int((order >= len(train)).sum())
        total = len(order)
        assert total == domain_run.windows_per_epoch
        assert replayed > 0 and abs(replayed / total - FRACTION) <= batch / 2 / total
        # Counted by source in the batches the epoch really feeds.
        fed = _windows(domain_run.epoch_dataset(epoch, 0, None))
        assert len(fed) == total
        assert sum(row in replay_rows for row in fed) == replayed
    assert domain_run.schedule.steps_per_epoch == -(-domain_run.windows_per_epoch // batch)
    metrics = json.loads((domain_run.run_dir / "metrics.json").read_text())
    assert metrics["steps"] == 2 * domain_run.schedule.steps_per_epoch


def test_negative_sampling_keeps_every_answer_window_and_is_seeded(
    domain_run: Any, tiny_model_dir: Path, tmp_path: Path
) -> None:
    prepared = domain_run.prepared
    windows = domain_run.epoch_windows
    rows = zip(_rows(prepared.train), windows.has_answer, strict=True)
    answers = Counter(row for row, has in rows if has)
    assert answers and not windows.has_answer.all()
    ids = prepared.train["example_id"]
    fed = [Counter(_windows(domain_run.epoch_dataset(e, 0, None))) for e in (0, 1)]
    for epoch, counts in enumerate(fed):
        assert all(counts[row] >= n for row, n in answers.items())
        kept = windows.in_domain(epoch)
        negatives = Counter(ids[i] for i in kept if not windows.has_answer[i])
        assert max(negatives.values()) == 1
    assert windows.in_domain(0).tolist() != windows.in_domain(1).tolist()
    # The same seed draws the same windows in a fresh trainer; another seed others.
    again = _prepared_trainer(domain_run.config)
    assert Counter(_windows(again.epoch_dataset(1, 0, None))) == fed[1]
    values = domain_run.config.to_dict()
    values["train"]["seed"] = 7
    other = _prepared_trainer(Config.from_dict(values))
    assert other.epoch_windows.in_domain(0).tolist() != windows.in_domain(0).tolist()


def test_monitor_files_are_scored_at_each_validation(domain_run: Any) -> None:
    with (domain_run.run_dir / "history.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2
    for name in ("squad-dev", "held_out"):
        for score in ("exact_match", "f1"):
            values = [float(row[f"monitor_{name}_{score}"]) for row in rows]
            assert all(0 <= value <= 100 for value in values)
    assert set(domain_run.prepared.monitors) == {"squad-dev", "held_out"}
    assert (domain_run.run_dir / "curves.png").is_file()
    env = json.loads((domain_run.run_dir / "env.json").read_text())
    assert [Path(name).name for name, _ in env["data_files"]["replay"]] == ["general.json"]


def test_features_are_cached_and_sampling_stays_out_of_the_fingerprint(
    domain_run: Any, tmp_path: Path
) -> None:
    root = domain_run.prepared.cache_dir.parent
    before = sorted(p.name for p in root.iterdir())
    values = domain_run.config.to_dict()
    values["preprocess"]["negative_windows"] = 3
    values["data"]["replay_fraction"] = 0.5
    again = _prepared_trainer(Config.from_dict(values))
    assert again.prepared.reused and again.prepared.fingerprint == domain_run.prepared.fingerprint
    # The replay and monitor features are read back from their own caches: none is added.
    assert sorted(p.name for p in root.iterdir()) == before
    assert len(again.prepared.replay) == len(domain_run.prepared.replay)


def test_a_resumed_run_skips_exactly_the_batches_it_trained(
    domain_run: Any, tiny_model_dir: Path, tmp_path: Path
) -> None:
    recording = recording_trainer()
    per_epoch = domain_run.schedule.steps_per_epoch
    # A checkpoint two steps into the second epoch (and at each epoch's end).
    stop = per_epoch + 2
    config = _domain_config(tiny_model_dir, tmp_path, epochs=2, checkpoint_every_steps=stop)
    first = recording(config, stop_after=stop)
    with pytest.raises(KeyboardInterrupt):
        first.train()
    resumed = recording(config, resume=True)
    resumed.train()
    assert resumed.asked == [(1, 2, None)]
    # The resumed epoch feeds the uninterrupted epoch's batches after its first two.
    fed = _windows(resumed.epoch_dataset(1, 2, None))
    assert fed == _windows(domain_run.epoch_dataset(1, 0, None))[2 * 8 :]
    metrics = json.loads((resumed.run_dir / "metrics.json").read_text())
    assert metrics["steps"] == 2 * per_epoch

    # A replay file changed or gone since the run started: --resume refuses, in one line.
    from qa_finetune.training.checkpoints import check_same_data

    general = Path(str(config.data.replay_file))
    general.write_text(general.read_text(encoding="utf-8") + " ", encoding="utf-8")
    with pytest.raises(QAFinetuneError, match=r"general\.json changed since"):
        check_same_data(resumed.run_dir, config.data)
    general.unlink()
    with pytest.raises(QAFinetuneError, match=r"data file not found: .*data\.replay_file"):
        check_same_data(resumed.run_dir, config.data)


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("data", "replay_fraction", 1.0, "must be in [0, 1)"),
        ("data", "replay_fraction", -0.1, "must be in [0, 1)"),
        ("data", "replay_fraction", 0.2, "no data.replay_file is set"),
        ("preprocess", "negative_windows", -1, "'all' or a whole number >= 0"),
        ("preprocess", "negative_windows", "some", "'all' or a whole number >= 0"),
        ("preprocess", "negative_windows", 1.5, "expected int or str"),
        ("train", "monitor_files", "a/dev.json,b/dev.json", "two files are named 'dev'"),
        ("train", "monitor_files", " , ", "names no file"),
    ],
)
def test_bad_values_are_one_line(section: str, key: str, value: Any, message: str) -> None:
    with pytest.raises(QAFinetuneError) as error:
        Config.from_dict({section: {key: value}})
    assert message in str(error.value) and "\n" not in str(error.value)
    assert f"{section}.{key}" in str(error.value)


@pytest.mark.parametrize("key", ["replay_file", "monitor_files"])
def test_a_missing_file_is_one_line_and_leaves_nothing_behind(
    tiny_model_dir: Path, tmp_path: Path, key: str
) -> None:
    from qa_finetune.training.trainer import train

    values = tiny_run_config(tiny_model_dir, tmp_path / "runs").to_dict()
    section = "data" if key == "replay_file" else "train"
    values[section][key] = str(tmp_path / "missing.json")
    with pytest.raises(QAFinetuneError) as error:
        train(Config.from_dict(values))
    message = str(error.value)
    assert "missing.json" in message and f"{section}.{key}" in message and "\n" not in message
    assert not (tmp_path / "runs" / "tiny").exists()


def test_zero_negative_windows_keep_the_answer_windows_alone(
    tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    values = tiny_run_config(tiny_model_dir, tmp_path / "runs").to_dict()
    values["preprocess"]["negative_windows"] = 0
    with caplog.at_level("INFO", logger="qa_finetune"):
        trainer = _prepared_trainer(Config.from_dict(values))
    answers = int(trainer.epoch_windows.has_answer.sum())
    assert (
        f"epoch windows: {answers} in-domain ({answers} answer windows, 0 sampled without), "
        "0 replay"
    ) in caplog.messages
    # Zero keeps the answer windows alone, in every epoch.
    kept = trainer.epoch_windows.in_domain(0)
    assert trainer.epoch_windows.has_answer[kept].all()
    assert trainer.windows_per_epoch == int(trainer.epoch_windows.has_answer.sum())
    np.testing.assert_array_equal(kept, trainer.epoch_windows.in_domain(3))
