"""Turn a run's latest training checkpoint into a model directory.

``model/`` holds the weights with the best validation F1. The final weights of a finished run,
or the partial weights of an interrupted one, live only in ``checkpoints/``; exporting them
gives a folder that ``ask``, ``evaluate`` and ``from_pretrained`` load like any other.
"""

from __future__ import annotations

from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.runs import directory as rundir


def _architecture_source(run_dir: Path) -> Path:
    """A model directory with the run's architecture: its saved model, else its base model."""
    saved = run_dir / rundir.MODEL_DIR
    if saved.is_dir():
        return saved
    from qa_finetune.config import load_config
    from qa_finetune.modeling.reference import resolve_model_dir

    config = load_config(run_dir / "config.yaml")
    return resolve_model_dir(config.model.name_or_path, config.model.revision)


def export_checkpoint(run_dir: Path, output: Path | None = None, overwrite: bool = False) -> Path:
    """Write the latest checkpoint of ``run_dir`` as ``RUN/model-step-N`` (or ``output``)."""
    import tensorflow as tf

    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.reference import load_tokenizer

    run_dir = Path(run_dir)
    if not rundir.has_checkpoint(run_dir):
        raise QAFinetuneError(
            f"{run_dir} has no training checkpoint: pass a run directory written by "
            "qa-finetune train"
        )
    path = tf.train.latest_checkpoint(str(run_dir / rundir.CHECKPOINT_DIR))
    if path is None:
        raise QAFinetuneError(
            f"{run_dir / rundir.CHECKPOINT_DIR} names a checkpoint whose files are missing"
        )
    step = int(path.rsplit("-", 1)[-1])
    target = Path(output) if output is not None else run_dir / f"model-step-{step}"
    if target.exists() and not overwrite:
        raise QAFinetuneError(f"{target} already exists: pass --overwrite or choose --output")
    # An unusable output folder fails here, before the model loads (an OSError: one line).
    target.parent.mkdir(parents=True, exist_ok=True)

    source = _architecture_source(run_dir)
    model = load_qa_model(source)
    # Only the model is restored; the optimizer slots in the checkpoint are not needed.
    status = tf.train.Checkpoint(model=model).restore(path).expect_partial()
    try:
        status.assert_existing_objects_matched()
    except AssertionError as exc:
        raise QAFinetuneError(
            f"{path} does not fit the model in {source}: the checkpoint belongs to another "
            "architecture"
        ) from exc
    return rundir.save_model_atomic(model, load_tokenizer(source), target)
