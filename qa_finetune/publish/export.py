"""``qa-finetune export``: a run's weights as a model folder, a SavedModel or an ONNX model.

The formats and their writers are in ``qa_finetune.modeling.formats`` (``hf``: a model folder
with PyTorch-named weights too; ``savedmodel``: TF Serving; ``onnx``: ONNX Runtime, which
``qa-finetune ask`` runs without TensorFlow); this module picks the weights and the folder.

The serving folders also hold ``config.json`` and the tokenizer files, and every folder
``qa_config.json`` (the run's window and decoding settings, which checkpoint and step), so
``ask`` outside the run and a serving stack window and decode as the run does.
``--checkpoint best`` (the default) reads ``RUN/model/`` (the weights training kept, which
``ask --model RUN`` uses); ``latest`` reads the latest training checkpoint (the final weights,
or an interrupted run's). Every folder is
written beside its target and renamed into place: a failure leaves nothing half-written. Each
carries a ``.qa-finetune-export`` marker: ``--overwrite`` replaces only a folder that has it,
never a run directory, an output root or a feature cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import write_json
from qa_finetune.files.disk_space import is_disk_full
from qa_finetune.files.staged_folders import staged_folder
from qa_finetune.libraries.extras import require
from qa_finetune.modeling import formats
from qa_finetune.modeling.formats import ExportFormat
from qa_finetune.modeling.formats.qa_config import QA_CONFIG, qa_settings, read_qa_config
from qa_finetune.modeling.saving import save_model_atomic
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.finished import finished_steps, model_is_last
from qa_finetune.runs.ownership import EXPORT_MARKER, check_replaceable, write_marker
from qa_finetune.runs.paths import RunPaths
from qa_finetune.runs.training_data_file import copy_training_data
from qa_finetune.training.failures import disk_full_error

CHECKPOINTS = ("latest", "best")
# What `ask --model RUN` answers with: RUN/model, the weights training kept.
DEFAULT_CHECKPOINT = "best"


def _architecture_source(run_dir: Path) -> Path:
    """A model directory with the run's architecture: its saved model, else its base model."""
    saved = RunPaths(run_dir).model
    if saved.is_dir():
        return saved
    from qa_finetune.modeling.reference import resolve_model_dir
    from qa_finetune.runs.lookup import load_run_config

    config = load_run_config(run_dir)
    return resolve_model_dir(config.model.name_or_path, config.model.revision)


def _latest_checkpoint(run_dir: Path) -> tuple[str, int]:
    import tensorflow as tf

    if not rundir.has_checkpoint(run_dir) and finished_steps(run_dir) is not None:
        raise QAFinetuneError(
            f"{run_dir} finished and its checkpoint was removed then (its model/ holds its "
            "best weights, not its last): --checkpoint best exports model/; train with --set "
            "train.keep_checkpoint=true to keep the last weights"
        )
    if not rundir.has_checkpoint(run_dir):
        raise QAFinetuneError(
            f"{run_dir} has no training checkpoint: pass a run directory written by "
            "qa-finetune train, or --checkpoint best for its model/"
        )
    path = tf.train.latest_checkpoint(str(RunPaths(run_dir).checkpoints))
    if path is None:
        raise QAFinetuneError(
            f"{RunPaths(run_dir).checkpoints} names a checkpoint whose files are missing"
        )
    return path, int(path.rsplit("-", 1)[-1])


def _load_latest(run_dir: Path, path: str) -> tuple[Any, Path]:
    """The model with the checkpoint's weights, and the folder its architecture came from."""
    import tensorflow as tf

    from qa_finetune.modeling.loading import load_qa_model

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
    return model, source


def check_source(run_dir: Path) -> None:
    """Raise unless ``run_dir`` is a folder (cheap: checked before TensorFlow loads)."""
    hint = "pass a run directory written by qa-finetune train, or a model folder"
    if run_dir.exists() and not run_dir.is_dir():
        raise QAFinetuneError(f"{run_dir} is a file, not a run directory: {hint}")
    if not run_dir.is_dir():
        raise QAFinetuneError(f"{run_dir} does not exist: {hint}")


def _best_model_dir(run_dir: Path) -> Path:
    """``RUN/model`` (or ``run_dir`` itself when it is a model folder)."""
    check_source(run_dir)
    for candidate in (RunPaths(run_dir).model, run_dir):
        if (candidate / "config.json").is_file():
            return candidate
    raise QAFinetuneError(
        f"{run_dir} has no model (model/config.json): train the run to the end, or export "
        "the latest checkpoint with --checkpoint latest"
    )


def _check_arguments(name: str, checkpoint: str, quantize: str | None) -> ExportFormat:
    fmt = formats.get(name)
    if checkpoint not in CHECKPOINTS:
        raise QAFinetuneError(f"unknown checkpoint {checkpoint!r}: choose latest or best")
    known = sorted({q for f in formats.REGISTRY.values() for q in f.quantizations})
    if quantize is not None and quantize not in known:
        raise QAFinetuneError(
            f"unknown quantisation {quantize!r}: the only one is {formats.choices(known)}"
        )
    if quantize and quantize not in fmt.quantizations:
        takers = [f.name for f in formats.REGISTRY.values() if quantize in f.quantizations]
        raise QAFinetuneError(
            f"--quantize {quantize} applies to --format {formats.choices(takers)} only"
        )
    for module in fmt.requires:
        # Fail before minutes of loading when the extra is missing.
        require(module, fmt.extra, f"--format {fmt.name}")
    return fmt


def export_run(
    run_dir: Path,
    fmt: str = "hf",
    checkpoint: str | None = None,
    output: Path | None = None,
    quantize: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Export a run's weights; returns the folder written.

    ``checkpoint`` defaults to ``best`` for every format: ``RUN/model``, the weights
    ``ask --model RUN`` answers with. Default folders: ``RUN/model`` (hf, best: the PyTorch
    weights and ``qa_config.json`` added in place), ``RUN/model-step-N`` (hf, latest),
    ``RUN/savedmodel``, ``RUN/onnx``. Every folder gets a ``qa_config.json`` naming the
    checkpoint and its step.
    """
    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.reference import load_tokenizer

    run_dir = Path(run_dir)
    checkpoint = checkpoint or DEFAULT_CHECKPOINT
    chosen = _check_arguments(fmt, checkpoint, quantize)
    serving = chosen.serving
    source, path, step = _weights_of(run_dir, checkpoint)
    if checkpoint == "latest":
        default = run_dir / (fmt if serving else f"model-step-{step}")
    else:
        default = source.parent / fmt if serving else source
    target = Path(output) if output is not None else default
    # Only the default hf folder of the best weights is the run's model/ itself.
    in_place = not serving and checkpoint == "best" and output is None
    if in_place and not _is_runs_model(target):
        raise QAFinetuneError(
            f"{target} is a model folder of its own, not a run's model/: export never rewrites "
            "it in place (its other files would go); pass --output NEW_FOLDER"
        )
    if not in_place:
        # Before the model loads: a folder export did not make is never replaced.
        _check_target(target, overwrite, own_default=checkpoint == "latest" and target == default)
    # An unusable output folder fails here, before the model loads (an OSError: one line).
    target.parent.mkdir(parents=True, exist_ok=True)
    if path is not None:
        model, source = _load_latest(run_dir, path)
    else:
        model = load_qa_model(source)
    tokenizer = load_tokenizer(source)
    recorded = _run_of(run_dir, source)  # the run's model/: its settings and training data
    settings = qa_settings(recorded, tokenizer)
    settings.update(format=fmt, source=source.name, checkpoint=checkpoint, step=step)
    try:
        if in_place:
            return _add_to_model_folder(model, tokenizer, target, settings)
        return _write_export(chosen, model, tokenizer, target, quantize, settings, recorded)
    except Exception as exc:
        # h5py says "Can't close file (errno = 2)" when the disk is full: say what it is.
        if is_disk_full(exc, target.parent):
            raise disk_full_error(target.parent, "--output") from None
        raise


def _weights_of(run_dir: Path, checkpoint: str) -> tuple[Path, str | None, int | None]:
    """(the model folder, the checkpoint whose weights replace its own or None, their step)
    for ``checkpoint`` best or latest of ``run_dir``."""
    if checkpoint == "latest" and (rundir.has_checkpoint(run_dir) or not model_is_last(run_dir)):
        path, step = _latest_checkpoint(run_dir)
        return _architecture_source(run_dir), path, step
    # A finished run keeps no checkpoint; its model/ may hold its last weights.
    source = RunPaths(run_dir).model if checkpoint == "latest" else _best_model_dir(run_dir)
    return source, None, _best_step(source)


def _is_runs_model(folder: Path) -> bool:
    """``RUN/model``: the model folder training wrote into a run directory."""
    from qa_finetune.runs.ownership import is_run_directory
    from qa_finetune.runs.paths import MODEL_DIR

    return folder.name == MODEL_DIR and is_run_directory(folder.parent)


def _add_to_model_folder(
    model: Any, tokenizer: Any, target: Path, settings: dict[str, Any]
) -> Path:
    """RUN/model re-saved with PyTorch weights and its settings; it stays training's folder
    (no export marker)."""
    save_model_atomic(model, tokenizer, target)
    files = sorted(p.name for p in target.iterdir() if p.is_file())
    write_json(target / QA_CONFIG, {**settings, "files": files})
    return target


def _write_export(
    fmt: ExportFormat,
    model: Any,
    tokenizer: Any,
    target: Path,
    quantize: str | None,
    settings: dict[str, Any],
    recorded: Path,
) -> Path:
    """The format's files, its settings, the record of what ``recorded`` (the model folder)
    trained on, and the marker, built beside ``target`` and swapped in."""
    with staged_folder(target) as staging:
        copy_training_data(recorded, staging)
        files = fmt.write(model, tokenizer, staging, quantize)
        if fmt.serving:
            # What a serving stack needs beside the model to window and decode.
            model.config.save_pretrained(str(staging))
            tokenizer.save_pretrained(str(staging))
        write_json(staging / QA_CONFIG, {**settings, "files": files})
        write_marker(staging, EXPORT_MARKER, fmt.name)
    return target


def _run_of(run_dir: Path, source: Path) -> Path:
    """The folder whose run settings an export records: the run's model/ (or the model
    folder given), also when the weights are a checkpoint of a run without model/ yet."""
    from qa_finetune.runs.ownership import is_run_directory

    return RunPaths(run_dir).model if is_run_directory(run_dir) else source


def _best_step(model_dir: Path) -> int | None:
    """The training step of the weights in ``RUN/model``: the best validation's, or the
    last step when the run kept its final weights; None outside a run or before its end."""
    import json

    from qa_finetune.runs.lookup import run_dir_of

    run_dir = run_dir_of(model_dir)
    if run_dir is None:
        return None
    try:
        metrics = json.loads(RunPaths(run_dir).metrics.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(metrics, dict):
        return None
    step = metrics.get("steps" if metrics.get("kept_model") == "last" else "best_step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _check_target(target: Path, overwrite: bool, own_default: bool) -> None:
    """Refuse a ``--output`` that export did not make, or one that exists without
    ``--overwrite``. ``own_default``: the target is ``RUN/model-step-N``, a name only export
    writes (such folders made before the marker have none)."""
    known = own_default or _is_unmarked_export(target)
    check_replaceable(target, EXPORT_MARKER, "qa-finetune export", "--output", known=known)
    if (target.exists() or target.is_symlink()) and not overwrite:
        raise QAFinetuneError(f"{target} already exists: pass --overwrite or choose --output")


def _is_unmarked_export(folder: Path) -> bool:
    """A savedmodel/onnx export written before the marker: its qa_config.json names it (a
    model folder's names ``hf``: that may be a run's own model/, never replaced)."""
    serving = [f.name for f in formats.SERVING]
    try:
        return folder.is_dir() and read_qa_config(folder).get("format") in serving
    except QAFinetuneError:
        return False
