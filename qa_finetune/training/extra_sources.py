"""The data a run uses besides its own train and validation sets: the general-domain files it
replays (``data.replay_file``) and the extra validation sets it scores
(``train.monitor_files``). Each is prepared as a run of its own data would be: this module
says which data that is, as a config; ``prepare`` builds and caches it by fingerprint."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from qa_finetune.config import Config
from qa_finetune.config.sources import monitor_names
from qa_finetune.data.loading import split_paths
from qa_finetune.data.records import DataError
from qa_finetune.files import check_file


def _with_data(config: Config, train_file: str | None, validation_file: str | None) -> Config:
    """``config`` reading only these files: no Hub dataset, no held-out split, no sample
    limit on training data, nothing replayed or monitored."""
    data = dataclasses.replace(
        config.data,
        dataset=None,
        train_file=train_file,
        validation_file=validation_file,
        validation_fraction=0.0,
        max_train_samples=None,
        replay_file=None,
        replay_fraction=0.0,
    )
    train = dataclasses.replace(config.train, monitor_files=None)
    return dataclasses.replace(config, data=data, train=train)


def replay_config(config: Config) -> Config | None:
    """The replay files as training data (windows labelled as the run's own), or None."""
    if not config.data.replay_file:
        return None
    return _with_data(config, config.data.replay_file, None)


def monitor_configs(config: Config) -> dict[str, Config]:
    """Each monitor file, by name, as validation data (``data.max_eval_samples`` applies)."""
    return {
        name: _with_data(config, None, path)
        for name, path in monitor_names(config.train.monitor_files)
    }


def check_monitor_files(config: Config) -> None:
    """Fail before any work when a monitor file is missing (``data.check_files_exist`` checks
    the replay files with the run's own)."""
    for name in split_paths(config.train.monitor_files or ""):
        check_file(Path(name), "data file", "train.monitor_files", DataError)
