"""``qa-finetune export``: a run's weights as a model folder, a SavedModel or an ONNX model.

The formats and their writers are in ``qa_finetune.modeling.formats`` (``hf``: a model folder
with PyTorch-named weights too; ``savedmodel``: TF Serving; ``onnx``: ONNX Runtime, which
``qa-finetune ask`` runs without TensorFlow); this module picks the weights and the folder.

The serving folders also hold ``config.json``, the tokenizer files and
``qa_config.json`` (window and decoding settings), so a serving stack can window and decode.
``--checkpoint best`` reads ``RUN/model/`` (the weights training kept); ``latest`` reads the
latest training checkpoint (the final weights, or an interrupted run's). Every folder is
written beside its target and renamed into place: a failure leaves nothing half-written. Each
carries a ``.qa-finetune-export`` marker: ``--overwrite`` replaces only a folder that has it,
never a run directory, an output root or a feature cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.extras import require
from qa_finetune.files import staged_folder, write_json
from qa_finetune.modeling import formats
from qa_finetune.modeling.formats import ExportFormat
from qa_finetune.modeling.formats.qa_config import QA_CONFIG, qa_settings, read_qa_config
from qa_finetune.modeling.saving import save_model_atomic
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.ownership import EXPORT_MARKER, check_replaceable, write_marker
from qa_finetune.runs.paths import RunPaths

CHECKPOINTS = ("latest", "best")


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


def _best_model_dir(run_dir: Path) -> Path:
    """``RUN/model`` (or ``run_dir`` itself when it is a model folder)."""
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

    ``checkpoint`` defaults to ``latest`` for ``hf`` (a folder beside ``model/``) and ``best``
    for the serving formats. Default folders: ``RUN/model-step-N`` (hf, latest), ``RUN/model``
    (hf, best: adds the PyTorch weights in place), ``RUN/savedmodel``, ``RUN/onnx``.
    """
    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.reference import load_tokenizer

    run_dir = Path(run_dir)
    # A model folder is written beside model/; a serving format comes from model/ itself.
    serving = formats.get(fmt).serving
    checkpoint = checkpoint or ("best" if serving else "latest")
    chosen = _check_arguments(fmt, checkpoint, quantize)
    if checkpoint == "latest":
        path, step = _latest_checkpoint(run_dir)
        default = run_dir / (fmt if serving else f"model-step-{step}")
    else:
        source = _best_model_dir(run_dir)
        default = source.parent / fmt if serving else source
    target = Path(output) if output is not None else default
    in_place = not serving and checkpoint == "best" and target == default
    if not in_place:
        # Before the model loads: a folder export did not make is never replaced.
        _check_target(target, overwrite, own_default=checkpoint == "latest" and target == default)
    # An unusable output folder fails here, before the model loads (an OSError: one line).
    target.parent.mkdir(parents=True, exist_ok=True)
    if checkpoint == "latest":
        model, source = _load_latest(run_dir, path)
    else:
        model = load_qa_model(source)
    tokenizer = load_tokenizer(source)
    if in_place:
        # RUN/model stays training's folder (no export marker): only PyTorch weights are added.
        return save_model_atomic(model, tokenizer, target)
    with staged_folder(target) as staging:
        files = chosen.write(model, tokenizer, staging, quantize)
        if serving:
            # What a serving stack needs beside the model to window and decode.
            model.config.save_pretrained(str(staging))
            tokenizer.save_pretrained(str(staging))
            settings = qa_settings(source, tokenizer)
            settings.update(format=fmt, files=files, source=source.name, checkpoint=checkpoint)
            write_json(staging / QA_CONFIG, settings)
        write_marker(staging, EXPORT_MARKER, fmt)
    return target


def _check_target(target: Path, overwrite: bool, own_default: bool) -> None:
    """Refuse a ``--output`` that export did not make, or one that exists without
    ``--overwrite``. ``own_default``: the target is ``RUN/model-step-N``, a name only export
    writes (such folders made before the marker have none)."""
    known = own_default or _is_unmarked_export(target)
    check_replaceable(target, EXPORT_MARKER, "qa-finetune export", "--output", known=known)
    if (target.exists() or target.is_symlink()) and not overwrite:
        raise QAFinetuneError(f"{target} already exists: pass --overwrite or choose --output")


def _is_unmarked_export(folder: Path) -> bool:
    """A savedmodel/onnx export written before the marker: its qa_config.json names it."""
    try:
        return folder.is_dir() and read_qa_config(folder).get("format") in formats.FORMATS
    except QAFinetuneError:
        return False
