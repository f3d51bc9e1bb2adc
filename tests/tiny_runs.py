"""The one config for training the tiny test model on the bundled sample data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sample_files import sample_data_path

from qa_finetune.config import Config


def tiny_run_config(
    model_dir: Path, output_dir: Path, train_samples: int = 16, **train: Any
) -> Config:
    """A few sample questions, short windows, batch 8, no TensorBoard; ``train`` overrides."""
    return Config.from_dict(
        {
            "model": {"name_or_path": str(model_dir)},
            "data": {
                "train_file": str(sample_data_path("train")),
                "validation_file": str(sample_data_path("validation")),
                "max_train_samples": train_samples,
                "max_eval_samples": 8,
            },
            "preprocess": {"max_length": 128, "stride": 32},
            "train": {
                "batch_size": 8,
                "output_dir": str(output_dir),
                "run_name": "tiny",
                "tensorboard": False,
                **train,
            },
            "inference": {"batch_size": 16},
        }
    )
