"""Export formats: one module per format, and the registry every command reads.

Each module (``hf``, ``savedmodel``, ``onnx``) holds its writer, its file names and, for a
format a runtime answers from without TensorFlow, the loader of that predictor; its
``FORMAT`` is listed once below. ``export`` (formats and quantisations), ``ask``,
``evaluate`` and ``serve`` (``BACKENDS``, ``choose_backend``, ``load_predictor``), ``push``
(``SERVING``: the folders it uploads) and the model card (each format's ``card_note``) read
it, so a new format is one module and one line here. Nothing here imports TensorFlow,
transformers or an optional extra at import time.
"""

from __future__ import annotations

from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.formats import hf, onnx, savedmodel
from qa_finetune.modeling.formats.base import ExportFormat, Predictor, choices

REGISTRY: dict[str, ExportFormat] = {f.name: f for f in (hf.FORMAT, savedmodel.FORMAT, onnx.FORMAT)}
FORMATS = tuple(REGISTRY)
# Serving folders (RUN/<name>/ with qa_config.json): what push uploads and the card describes.
SERVING = tuple(f for f in REGISTRY.values() if f.serving)
# Formats a runtime other than TensorFlow answers from, by backend name.
RUNTIMES = {f.backend: f for f in REGISTRY.values() if f.backend}
BACKENDS = ("auto", "tf", *RUNTIMES)

__all__ = [
    "BACKENDS",
    "FORMATS",
    "REGISTRY",
    "SERVING",
    "ExportFormat",
    "Predictor",
    "choices",
    "choose_backend",
    "get",
    "load_predictor",
]


def get(name: str) -> ExportFormat:
    """The format called ``name``; another name is a one-line error listing the formats."""
    if name not in REGISTRY:
        raise QAFinetuneError(f"unknown format {name!r}: choose one of {', '.join(FORMATS)}")
    return REGISTRY[name]


def choose_backend(model_dir: Path, backend: str, quantized: bool = False) -> str:
    """``tf`` or a runtime's backend for ``model_dir``; ``auto`` takes a runtime's model when
    the folder has one, else TensorFlow. ``quantized`` picks the quantised model."""
    if backend not in BACKENDS:
        raise QAFinetuneError(f"unknown backend {backend!r}: choose {choices(BACKENDS)}")
    if quantized and backend == "tf":
        raise QAFinetuneError(
            "--quantized runs the int8 ONNX model: use --backend onnx or auto, or drop --quantized"
        )
    if quantized:
        backend = "onnx"
    for name, fmt in RUNTIMES.items():
        if backend not in ("auto", name):
            continue
        assert fmt.model_file is not None
        path = fmt.model_file(model_dir, quantized)
        if path.is_file():
            return name
        if quantized:
            raise QAFinetuneError(
                f"--quantized: {model_dir} has no {path.name}: export one with "
                f"`qa-finetune export --model RUN --format {fmt.name} --quantize int8` and pass "
                "that folder as --model, or drop --quantized"
            )
        if backend == name:
            raise QAFinetuneError(
                f"--backend {name}: {model_dir} has no {path.name}: export one with "
                f"`qa-finetune export --model RUN --format {fmt.name}` and pass that folder as "
                "--model"
            )
    return "tf"


def load_predictor(model_dir: Path, backend: str, quantized: bool = False) -> Predictor:
    """The predictor of a runtime's backend (not ``tf``: a Keras model needs no wrapper)."""
    loader = RUNTIMES[backend].load_predictor
    assert loader is not None
    return loader(model_dir, quantized)
