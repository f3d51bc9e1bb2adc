"""The ONNX Runtime predict step: windows in, start/end logits out, without TensorFlow.

``QuestionAnswerer`` builds windows and decodes answers with the same code for every backend;
only this step differs. Any object with ``input_names`` and ``predict_batch(batch) ->
(start_logits, end_logits)`` can stand in for it (a serving layer may bring its own).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from qa_finetune.errors import QAFinetuneError

ONNX_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
BACKENDS = ("auto", "tf", "onnx")
_TOKEN_IDS = ("cls_token_id", "pad_token_id")


class Predictor(Protocol):
    """The predict step shared by the backends."""

    input_names: tuple[str, ...]

    def predict_batch(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits ``[batch, length]`` for int32 ``[batch, length]`` inputs."""
        ...


def onnx_file(model_dir: Path, quantized: bool = False) -> Path:
    return Path(model_dir) / (INT8_FILE if quantized else ONNX_FILE)


def choose_backend(model_dir: Path, backend: str, quantized: bool = False) -> str:
    """``tf`` or ``onnx`` for ``model_dir``; ``auto`` takes ONNX when the folder has it."""
    if backend not in BACKENDS:
        raise QAFinetuneError(f"unknown backend {backend!r}: choose auto, tf or onnx")
    if quantized and backend == "tf":
        raise QAFinetuneError("the int8 model is an ONNX model: use --backend onnx or auto")
    if quantized:
        backend = "onnx"
    path = onnx_file(model_dir, quantized)
    if backend == "onnx" and not path.is_file():
        raise QAFinetuneError(
            f"--backend onnx: {model_dir} has no {path.name}: export one with "
            "`qa-finetune export RUN --format onnx` and pass that folder as --model"
        )
    if backend == "auto":
        return "onnx" if path.is_file() else "tf"
    return backend


def qa_config(model_dir: Path) -> dict[str, Any]:
    """The export's ``qa_config.json`` (window and decoding settings), or ``{}``."""
    path = Path(model_dir) / "qa_config.json"
    if not path.is_file():
        return {}
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise QAFinetuneError(f"{path} is not valid JSON ({exc}): export the model again") from exc
    if not isinstance(values, dict):
        return {}
    for key, value in values.items():
        _check_setting(path, key, value)
    return values


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# The type each setting that is read back must have, and how the message names it.
_SETTING_TYPES: dict[str, tuple[Any, str]] = {
    **{
        key: (_is_int, "a whole number")
        for key in ("max_length", "stride", "n_best", "max_answer_length", "model_max_length")
    },
    **{
        key: (lambda v: v is None or (_is_int(v) and v >= 0), "a token id (>= 0)")
        for key in _TOKEN_IDS
    },
    "null_score_diff_threshold": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "a number",
    ),
    "question_first": (lambda v: isinstance(v, bool), "true or false"),
    "truncation_side": (lambda v: v in ("left", "right"), '"left" or "right"'),
    "input_names": (
        lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v),
        "a list of input names",
    ),
}


def _check_setting(path: Path, key: str, value: Any) -> None:
    """A setting of the wrong type is a one-line error naming the file and the key."""
    if key not in _SETTING_TYPES:
        return
    check, expected = _SETTING_TYPES[key]
    if not check(value):
        shown = json.dumps(value)[:40]
        raise QAFinetuneError(
            f"{path}: {key!r} must be {expected}, not {shown}: fix it or export the model again"
        )


class OnnxPredictor:
    """An ONNX Runtime session over an exported QA model."""

    backend = "onnx"

    def __init__(self, session: Any, path: Path) -> None:
        self.session = session
        self.path = path
        self.input_names = tuple(i.name for i in session.get_inputs())
        outputs = [o.name for o in session.get_outputs()]
        if sorted(outputs) != ["end_logits", "start_logits"]:
            raise QAFinetuneError(
                f"{path} returns {outputs}, not start_logits and end_logits: export it with "
                "`qa-finetune export RUN --format onnx`"
            )

    @classmethod
    def load(cls, path: Path, threads: int | None = None) -> OnnxPredictor:
        """Open ``path``; a missing extra or an unreadable file is a one-line error."""
        from qa_finetune.extras import require

        ort = require("onnxruntime", "onnx", "the ONNX backend", fix="pass --backend tf")
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        try:
            session = ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf types
            detail = str(exc).split("\n")[0][:200]
            raise QAFinetuneError(
                f"{path} is not a readable ONNX model ({detail}): export it again with "
                "`qa-finetune export RUN --format onnx`"
            ) from exc
        return cls(session, Path(path))

    def predict_batch(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        ids = batch["input_ids"]
        feed = {
            name: (batch[name] if name in batch else np.zeros_like(ids)).astype(
                np.int32, copy=False
            )
            for name in self.input_names
        }
        start, end = self.session.run(["start_logits", "end_logits"], feed)
        return start, end
