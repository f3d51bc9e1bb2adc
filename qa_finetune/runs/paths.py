"""The file names of a run directory, in one place: every module asks ``RunPaths``.

A run directory describes itself (see docs/outputs.md, "Run directory"); the names below
are part of that contract with users and other tools, so they are spelled once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CONFIG_FILE = "config.yaml"
MODEL_DIR = "model"
CHECKPOINT_DIR = "checkpoints"
METRICS_FILE = "metrics.json"
HISTORY_FILE = "history.csv"
CURVES_FILE = "curves.png"
ENV_FILE = "env.json"
PREPARE_REPORT_FILE = "prepare_report.json"
TENSORBOARD_DIR = "tensorboard"
EVAL_DIR = "eval"
NO_ANSWER_RULE_FILE = "no_answer_rule.json"
INTERPOLATION_FILE = "interpolation.json"
CALIBRATION_FILE = "calibration.json"
TRAINING_DATA_FILE = "training_data.json"


@dataclass(frozen=True)
class RunPaths:
    """The paths of one run directory's files and folders."""

    root: Path

    @property
    def config(self) -> Path:
        """The fully resolved config the run trained with."""
        return self.root / CONFIG_FILE

    @property
    def model(self) -> Path:
        """The saved model folder (best or last, per ``train.keep_model``)."""
        return self.root / MODEL_DIR

    @property
    def checkpoints(self) -> Path:
        """The last complete training state, for ``--resume``."""
        return self.root / CHECKPOINT_DIR

    @property
    def metrics(self) -> Path:
        return self.root / METRICS_FILE

    @property
    def no_answer_rule(self) -> Path:
        """The no-answer rule and threshold chosen on held-out questions, when one was."""
        return self.root / NO_ANSWER_RULE_FILE

    @property
    def calibration(self) -> Path:
        """How answers get their confidence, fitted on held-out questions, when it was."""
        return self.root / CALIBRATION_FILE

    @property
    def training_data(self) -> Path:
        """The hashes of what the run's weights trained on, its parents' included."""
        return self.root / TRAINING_DATA_FILE

    @property
    def interpolation(self) -> Path:
        """What ``interpolate`` averaged into this run, for a run it wrote."""
        return self.root / INTERPOLATION_FILE

    @property
    def history(self) -> Path:
        return self.root / HISTORY_FILE

    @property
    def curves(self) -> Path:
        return self.root / CURVES_FILE

    @property
    def env(self) -> Path:
        return self.root / ENV_FILE

    @property
    def prepare_report(self) -> Path:
        return self.root / PREPARE_REPORT_FILE

    @property
    def tensorboard(self) -> Path:
        return self.root / TENSORBOARD_DIR

    @property
    def eval_dir(self) -> Path:
        """Where ``evaluate`` writes its report by default."""
        return self.root / EVAL_DIR

    @property
    def eval_metrics(self) -> Path:
        return self.eval_dir / METRICS_FILE
