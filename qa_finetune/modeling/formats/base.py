"""What every export format declares, and what every predict step offers.

No heavy imports: the registry is read by ``--help``, by ``ask`` on an ONNX export (which
never imports TensorFlow or transformers) and by ``push``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # numpy costs a tenth of a second that --help does not need
    import numpy as np

# The two outputs every exported graph returns, in this order.
OUTPUT_NAMES = ("start_logits", "end_logits")


class Predictor(Protocol):
    """The predict step shared by the backends: a Keras model, or an object like this."""

    input_names: tuple[str, ...]
    # Optional: True when ``predict_batch`` may be called from several threads at once, so
    # ``predict_features`` may run passes side by side; without it, one pass at a time.
    # concurrent_calls: bool

    def predict_batch(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits ``[batch, length]`` for int32 ``[batch, length]`` inputs."""
        ...


# (model, tokenizer, staging folder, quantisation or None) -> the files written, by name.
Writer = Callable[[Any, Any, Path, "str | None"], list[str]]


@dataclass(frozen=True)
class ExportFormat:
    """One ``qa-finetune export --format``: how it is written and, for a format a runtime
    answers from without TensorFlow, the file that runtime runs and how to load it."""

    name: str  # the --format value and the default folder name (RUN/<name>/)
    help: str  # how ``export --help`` lists it
    write: Writer
    # A serving folder (config.json, tokenizer, qa_config.json beside the model), uploaded by
    # ``push`` and described in the card; otherwise a transformers model folder.
    serving: bool = True
    quantizations: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # modules of ``extra`` that writing needs
    extra: str = ""
    backend: str | None = None  # ``ask --backend`` value that runs this folder
    model_file: Callable[[Path, bool], Path] | None = None  # (folder, quantized) -> file
    load_predictor: Callable[[Path, bool], Predictor] | None = None
    card_note: Callable[[Path], str | None] | None = None  # the card's words on the folder


def input_names(tokenizer: Any) -> tuple[str, ...]:
    """The model inputs this tokenizer produces, in ``predict.INPUT_NAMES`` order."""
    from qa_finetune.modeling.predict import INPUT_NAMES

    return tuple(n for n in INPUT_NAMES if n in tokenizer.model_input_names)


def choices(names: Sequence[str]) -> str:
    """``a, b or c``: how messages and help list the allowed values."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
