"""``qa-finetune export``: a run's weights as a model folder, a SavedModel or an ONNX model.

- ``hf``: a ``save_pretrained`` folder (``tf_model.h5``) that also carries ``model.safetensors``
  in PyTorch names, so PyTorch and transformers 5 load it too.
- ``savedmodel``: a TF SavedModel with a ``serving_default`` signature, for TF Serving.
- ``onnx``: ``model.onnx`` (and ``model.int8.onnx`` with ``--quantize int8``) for ONNX Runtime;
  ``qa-finetune ask`` answers from it without importing TensorFlow.

The SavedModel and ONNX folders also hold ``config.json``, the tokenizer files and
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
from qa_finetune.runs import directory as rundir
from qa_finetune.runs.ownership import EXPORT_MARKER, check_replaceable, write_marker

FORMATS = ("hf", "savedmodel", "onnx")
CHECKPOINTS = ("latest", "best")
QA_CONFIG = "qa_config.json"
OUTPUT_NAMES = ("start_logits", "end_logits")


def _architecture_source(run_dir: Path) -> Path:
    """A model directory with the run's architecture: its saved model, else its base model."""
    saved = run_dir / rundir.MODEL_DIR
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
    path = tf.train.latest_checkpoint(str(run_dir / rundir.CHECKPOINT_DIR))
    if path is None:
        raise QAFinetuneError(
            f"{run_dir / rundir.CHECKPOINT_DIR} names a checkpoint whose files are missing"
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
    for candidate in (run_dir / rundir.MODEL_DIR, run_dir):
        if (candidate / "config.json").is_file():
            return candidate
    raise QAFinetuneError(
        f"{run_dir} has no model (model/config.json): train the run to the end, or export "
        "the latest checkpoint with --checkpoint latest"
    )


def qa_settings(model_dir: Path, tokenizer: Any) -> dict[str, Any]:
    """What a serving stack needs to window and decode like ``qa-finetune ask``."""
    from qa_finetune.modeling.for_answering import DEFAULT_MAX_LENGTH, DEFAULT_STRIDE
    from qa_finetune.runs.lookup import run_config

    trained = run_config(model_dir)
    max_length = trained.preprocess.max_length if trained else DEFAULT_MAX_LENGTH
    stride = trained.preprocess.stride if trained else DEFAULT_STRIDE
    encoding = tokenizer("Q", "C")
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    question_first = tokenizer.padding_side == "right"
    # The pair layout with the question and context marked, e.g. [CLS] Q [SEP] C [SEP].
    first, second = ("<question>", "<context>") if question_first else ("<context>", "<question>")
    template = [
        token if sequence is None else (first if sequence == 0 else second)
        for token, sequence in zip(tokens, encoding.sequence_ids(), strict=True)
    ]
    return {
        "max_length": max_length,
        "stride": stride,
        "n_best": trained.inference.n_best if trained else 20,
        "max_answer_length": trained.inference.max_answer_length if trained else 30,
        "null_score_diff_threshold": (
            trained.inference.null_score_diff_threshold if trained else 0.0
        ),
        "question_first": question_first,
        "truncation_side": getattr(tokenizer, "truncation_side", "right"),
        "pair_template": template,
        "cls_token": tokenizer.cls_token,
        "cls_token_id": tokenizer.cls_token_id,
        "cls_index": "position of cls_token_id in each window's input_ids",
        "pad_token_id": tokenizer.pad_token_id,
        "input_names": list(input_names(tokenizer)),
        "output_names": list(OUTPUT_NAMES),
        "model_max_length": min(int(tokenizer.model_max_length), 1_000_000),
    }


def input_names(tokenizer: Any) -> tuple[str, ...]:
    """The model inputs this tokenizer produces, in ``infer.INPUT_NAMES`` order."""
    from qa_finetune.modeling.predict import INPUT_NAMES

    return tuple(n for n in INPUT_NAMES if n in tokenizer.model_input_names)


def serving_function(model: Any, names: tuple[str, ...]) -> tuple[Any, list[Any]]:
    """A ``tf.function`` of named int32 [batch, length] inputs returning both logit tensors."""
    import tensorflow as tf

    signature = [tf.TensorSpec([None, None], tf.int32, name=name) for name in names]

    @tf.function(input_signature=signature)
    def serve(*inputs: Any) -> dict[str, Any]:
        outputs = model(dict(zip(names, inputs, strict=True)), training=False)
        return {"start_logits": outputs.start_logits, "end_logits": outputs.end_logits}

    return serve, signature


def _write_savedmodel(model: Any, tokenizer: Any, names: tuple[str, ...], staging: Path) -> None:
    import tensorflow as tf

    serve, _ = serving_function(model, names)
    # A bare module that tracks the weights: saving the Keras model itself would also trace
    # every Keras call function (about 4x slower), which no serving stack uses.
    module = tf.Module()
    module.weights = list(model.weights)
    module.serve = serve
    tf.saved_model.save(module, str(staging), signatures={"serving_default": serve})


def _write_onnx(
    model: Any, names: tuple[str, ...], staging: Path, quantize: str | None
) -> list[str]:
    from qa_finetune.publish import onnx_export

    serve, signature = serving_function(model, names)
    files = [onnx_export.convert(serve, signature, staging / onnx_export.ONNX_FILE).name]
    if quantize == "int8":
        source, target = staging / onnx_export.ONNX_FILE, staging / onnx_export.INT8_FILE
        files.append(onnx_export.quantize_int8(source, target).name)
    return files


def _check_arguments(fmt: str, checkpoint: str, quantize: str | None) -> None:
    if fmt not in FORMATS:
        raise QAFinetuneError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if checkpoint not in CHECKPOINTS:
        raise QAFinetuneError(f"unknown checkpoint {checkpoint!r}: choose latest or best")
    if quantize not in (None, "int8"):
        raise QAFinetuneError(f"unknown quantisation {quantize!r}: the only one is int8")
    if quantize and fmt != "onnx":
        raise QAFinetuneError("--quantize int8 applies to --format onnx only")
    if fmt == "onnx":
        from qa_finetune.extras import require

        # Fail before minutes of loading when the extra is missing.
        require("tf2onnx", "onnx", "--format onnx")
        require("onnxruntime", "onnx", "--format onnx")


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
    checkpoint = checkpoint or ("latest" if fmt == "hf" else "best")
    _check_arguments(fmt, checkpoint, quantize)
    if checkpoint == "latest":
        path, step = _latest_checkpoint(run_dir)
        default = run_dir / (f"model-step-{step}" if fmt == "hf" else fmt)
    else:
        source = _best_model_dir(run_dir)
        default = source if fmt == "hf" else source.parent / fmt
    target = Path(output) if output is not None else default
    in_place = fmt == "hf" and checkpoint == "best" and target == default
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
        return rundir.save_model_atomic(model, tokenizer, target)
    with rundir.staged_folder(target) as staging:
        if fmt == "hf":
            _write_hf(model, tokenizer, staging)
        else:
            files = _write_serving(model, tokenizer, staging, fmt, quantize)
            settings = qa_settings(source, tokenizer)
            settings.update(format=fmt, files=files, source=source.name, checkpoint=checkpoint)
            rundir.write_json(staging / QA_CONFIG, settings)
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
    from qa_finetune.modeling.onnx_backend import qa_config

    try:
        return folder.is_dir() and qa_config(folder).get("format") in FORMATS
    except QAFinetuneError:
        return False


def _write_hf(model: Any, tokenizer: Any, staging: Path) -> None:
    from qa_finetune.modeling.pt_weights import save_pytorch_safetensors

    model.save_pretrained(str(staging))
    tokenizer.save_pretrained(str(staging))
    save_pytorch_safetensors(model, staging)


def _write_serving(
    model: Any, tokenizer: Any, staging: Path, fmt: str, quantize: str | None
) -> list[str]:
    """The SavedModel or ONNX model, ``config.json`` and the tokenizer files."""
    names = input_names(tokenizer)
    if fmt == "savedmodel":
        _write_savedmodel(model, tokenizer, names, staging)
        files = ["saved_model.pb", "variables/"]
    else:
        files = _write_onnx(model, names, staging, quantize)
    model.config.save_pretrained(str(staging))
    tokenizer.save_pretrained(str(staging))
    return files


def export_checkpoint(run_dir: Path, output: Path | None = None, overwrite: bool = False) -> Path:
    """The latest checkpoint as a model folder (``export_run(..., "hf", "latest")``)."""
    return export_run(run_dir, "hf", "latest", output, overwrite=overwrite)
