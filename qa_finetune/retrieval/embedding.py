"""What makes a model folder a sentence encoder, and how its token vectors become one vector
per text (no TensorFlow: the forward pass is ``modeling/sentence_encoder.py``'s).

A sentence-transformers folder says so in ``modules.json``: a Transformer module, then a
Pooling module whose ``config.json`` names the pooling (all-MiniLM-L6-v2: the mean of the
token vectors under the attention mask), then usually Normalize. Vectors are always L2
normalised here, so a dot product is the cosine similarity the model was trained for.

An index records the encoder's name and a fingerprint of its weights, tokenizer and pooling;
a question must be embedded by the same encoder as the passages, or the distances mean
nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from qa_finetune.retrieval.bm25 import RetrievalError

MODULES = "modules.json"
POOLINGS = ("mean", "cls", "max")
# Files whose bytes decide the vectors: weights, tokenizer, pooling and length settings.
_FINGERPRINTED = (
    "model.safetensors",
    "tf_model.h5",
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer_config.json",
    "sentence_bert_config.json",
    MODULES,
)


@dataclass(frozen=True)
class EncoderInfo:
    """The encoder an index's vectors were made with, as the manifest records it."""

    name: str
    fingerprint: str
    dimension: int
    pooling: str
    max_length: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], where: str) -> EncoderInfo:
        try:
            return cls(**values)
        except TypeError:
            raise RetrievalError(
                f"{where} is damaged: rebuild the index with qa-finetune index"
            ) from None


@dataclass(frozen=True)
class SentenceConfig:
    """How a sentence-transformers folder pools and how long a text it reads."""

    pooling: str
    max_length: int


class Encoder(Protocol):
    """Turns texts into unit vectors (``modeling.sentence_encoder.SentenceEncoder``)."""

    info: EncoderInfo

    def encode(self, texts: Sequence[str], progress: Any = None) -> np.ndarray:
        """``[len(texts), dimension]`` float32 unit vectors; ``progress(done)`` after each
        batch when given."""
        ...


def sentence_config(folder: Path, name: str) -> SentenceConfig:
    """The pooling and text length of the sentence encoder in ``folder``; one line naming
    the problem when the folder is not a sentence encoder."""
    folder = Path(folder)
    found = _json(folder / MODULES, name)
    modules = [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []
    types = [str(m.get("type", "")) for m in modules]
    pooling_module = next(
        (m for m, t in zip(modules, types, strict=True) if t.endswith("Pooling")), None
    )
    if pooling_module is None or not any(t.endswith("Transformer") for t in types):
        raise RetrievalError(
            f"{name} is not a sentence encoder ({MODULES} names no Transformer and Pooling "
            "modules): pass a sentence-transformers model such as all-MiniLM-L6-v2"
        )
    pooling = _json(folder / str(pooling_module.get("path", "")) / "config.json", name)
    if pooling.get("pooling_mode_mean_tokens"):
        mode = "mean"
    elif pooling.get("pooling_mode_cls_token"):
        mode = "cls"
    elif pooling.get("pooling_mode_max_tokens"):
        mode = "max"
    else:
        raise RetrievalError(
            f"{name} pools its tokens in a way this version does not read ({sorted(pooling)}):"
            " pass a sentence encoder with mean, CLS or max pooling"
        )
    settings = folder / "sentence_bert_config.json"
    length = _json(settings, name).get("max_seq_length", 256) if settings.is_file() else 256
    return SentenceConfig(mode, int(length))


def _json(path: Path, name: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RetrievalError(
            f"{name} is not a sentence encoder (no {path.name} in {path.parent}): pass a "
            "sentence-transformers model such as all-MiniLM-L6-v2"
        ) from None
    except (ValueError, UnicodeDecodeError):
        raise RetrievalError(f"{path} is damaged: reinstall or download {name} again") from None


def fingerprint(folder: Path, pooling: str) -> str:
    """A hash of the files that decide an encoder's vectors (16 hex digits)."""
    digest = hashlib.sha256(pooling.encode())
    for name in _FINGERPRINTED:
        path = Path(folder) / name
        if path.is_file():
            digest.update(name.encode() + b"\0")
            with path.open("rb") as data:
                for block in iter(lambda: data.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()[:16]


def pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """One unit vector per text from its token vectors ``[batch, length, dim]`` and
    attention mask ``[batch, length]`` (padding left out of the mean and the max)."""
    hidden = hidden.astype(np.float32, copy=False)
    weights = mask.astype(np.float32)[:, :, None]
    if mode == "mean":
        vectors = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    elif mode == "cls":
        vectors = hidden[:, 0, :]
    elif mode == "max":
        vectors = np.where(weights > 0, hidden, -np.inf).max(axis=1)
    else:
        raise ValueError(f"unknown pooling {mode!r}")
    return normalise(vectors)


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
