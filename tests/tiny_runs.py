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


def tiny_no_answer_config(
    model_dir: Path, output_dir: Path, learning_rate: float, **train: Any
) -> dict[str, Any]:
    """The bundled unanswerable questions as training and validation data (all of them, 3
    steps), the threshold tuned on them; ``train`` overrides."""
    values = tiny_run_config(
        model_dir, output_dir, max_steps=3, learning_rate=learning_rate
    ).to_dict()
    data = sample_data_path("unanswerable")
    values["data"].update(
        train_file=str(data),
        validation_file=str(data),
        allow_no_answer=True,
        max_train_samples=None,
        max_eval_samples=None,
    )
    values["train"].update(tune_no_answer_threshold=True, **train)
    return values


def recording_trainer() -> Any:
    """A Trainer subclass noting the (epoch, skip, shard) each fit asks for, killed after
    the checkpoint at ``stop_after`` (a seam in use: ``epoch_dataset``)."""
    from qa_finetune.training.trainer import Trainer

    class RecordingTrainer(Trainer):
        """Feeds the usual batches and notes which (epoch, skip, shard) each fit asked for."""

        def __init__(self, *args: Any, stop_after: int | None = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.asked: list[tuple[int, int, Any]] = []
            self.stop_after = stop_after  # a checkpoint step to be killed at

        def epoch_dataset(self, epoch: int, skip: int, shard: Any) -> Any:
            self.asked.append((epoch, skip, shard))
            return super().epoch_dataset(epoch, skip, shard)

        def save(self, at_step: int) -> None:
            super().save(at_step)
            if at_step == self.stop_after:
                raise KeyboardInterrupt

    return RecordingTrainer
