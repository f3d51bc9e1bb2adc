"""A BERT encoder's forward pass in NumPy, for one short text at a time: the question that
``ask --index`` embeds before searching.

TensorFlow costs 11-17 ms for a 13-token question through MiniLM-L6 on two CPU cores whatever
the padding or tracing (its per-operation dispatch dominates a forward pass this small;
bench/reports/19-dense-hybrid-retrieval.md), while the same arithmetic in NumPy is a few dozen
small matrix products. The weights are the loaded TF model's own variables (``from_tf``), so
the two paths cannot drift apart, or, when no TF model is loaded, the encoder folder's
``model.safetensors`` read in PyTorch's names (``from_safetensors``): a question is then
embedded without starting TensorFlow at all, as ``ask --index`` on an ONNX export does. Batches
of passages stay on TensorFlow, which is faster for them. Only the plain BERT layout (absolute
positions, GELU) is read here; any other model keeps TF.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

# Abramowitz and Stegun 7.1.26: erf to 1.5e-7, under float32's own rounding of GELU.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def supports(config: Any) -> bool:
    """Whether ``config`` (a transformers config) is a BERT layout this module reads."""
    return (
        getattr(config, "model_type", None) == "bert"
        and getattr(config, "hidden_act", None) == "gelu"
        and getattr(config, "position_embedding_type", "absolute") == "absolute"
    )


class NumpyBert:
    """The last hidden states of a BERT encoder, computed in NumPy float32."""

    @classmethod
    def from_tf(cls, model: Any) -> NumpyBert:
        """The forward pass of the loaded TF BERT ``model``, on its own variables."""
        found = {}
        for variable in model.weights:
            name = variable.name.split(":")[0]
            if "/bert/" in name:
                found[name.split("/bert/", 1)[1]] = np.asarray(variable.numpy(), np.float32)
        return cls(model.config, found)

    @classmethod
    def from_safetensors(cls, config: Any, path: Path) -> NumpyBert:
        """The forward pass of the BERT whose PyTorch-named weights are the safetensors file
        ``path`` (``config``: its transformers config); no TensorFlow."""
        from safetensors.numpy import load_file

        found = {}
        for key, value in load_file(str(path)).items():
            name = _tf_name(key.removeprefix("bert."))
            if name is not None:
                # PyTorch's Linear stores [out, in]; the TF kernel is [in, out]: a transposed
                # view, which the matrix products read as it is (no copy).
                kernel = name.endswith("/kernel")
                found[name] = np.asarray(value.T if kernel else value, np.float32)
        return cls(config, found)

    def __init__(self, config: Any, found: dict[str, np.ndarray]) -> None:
        """``found``: the weights under TF's names, below the model's ``bert/``."""
        self.heads = int(config.num_attention_heads)
        self.eps = float(config.layer_norm_eps)
        self.words = found["embeddings/word_embeddings/weight"]
        self.positions = found["embeddings/position_embeddings/embeddings"]
        self.types = found["embeddings/token_type_embeddings/embeddings"]
        self.norm = (found["embeddings/LayerNorm/gamma"], found["embeddings/LayerNorm/beta"])
        self.layers = []
        for number in range(int(config.num_hidden_layers)):
            at = f"encoder/layer_._{number}/"

            def dense(part: str, at: str = at) -> tuple[np.ndarray, np.ndarray]:
                return found[at + part + "/kernel"], found[at + part + "/bias"]

            def norm(part: str, at: str = at) -> tuple[np.ndarray, np.ndarray]:
                return found[at + part + "/LayerNorm/gamma"], found[at + part + "/LayerNorm/beta"]

            query, key, value = (dense(f"attention/self/{p}") for p in ("query", "key", "value"))
            # One product for query, key and value: three small products cost three dispatches.
            joined = (
                np.concatenate([query[0], key[0], value[0]], axis=1),
                np.concatenate([query[1], key[1], value[1]]),
            )
            self.layers.append(
                (
                    joined,
                    dense("attention/output/dense"),
                    norm("attention/output"),
                    dense("intermediate/dense"),
                    dense("output/dense"),
                    norm("output"),
                )
            )

    def hidden(self, ids: np.ndarray, types: np.ndarray) -> np.ndarray:
        """``[1, length, hidden]`` for one unpadded text's token ids and type ids."""
        ids, types = np.asarray(ids).reshape(-1), np.asarray(types).reshape(-1)
        length = len(ids)
        x = self.words[ids] + self.positions[:length] + self.types[types]
        x = self._layer_norm(x, self.norm)
        size = x.shape[1] // self.heads
        scale = np.float32(1.0 / np.sqrt(size))
        for qkv, attention_out, attention_norm, inner, outer, out_norm in self.layers:
            joined = x @ qkv[0] + qkv[1]
            q, k, v = (
                joined[:, i * x.shape[1] : (i + 1) * x.shape[1]]
                .reshape(length, self.heads, size)
                .transpose(1, 0, 2)
                for i in range(3)
            )
            scores = (q @ k.transpose(0, 2, 1)) * scale
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(length, -1)
            x = self._layer_norm(x + context @ attention_out[0] + attention_out[1], attention_norm)
            h = _gelu(x @ inner[0] + inner[1])
            x = self._layer_norm(x + h @ outer[0] + outer[1], out_norm)
        return x[None, :, :].astype(np.float32, copy=False)

    def _layer_norm(self, x: np.ndarray, weights: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        centred = x - mean
        variance = (centred * centred).mean(axis=-1, keepdims=True)
        return centred / np.sqrt(variance + np.float32(self.eps)) * weights[0] + weights[1]


_EMBEDDING = re.compile(r"embeddings\.(word_embeddings|position_embeddings|token_type_embeddings)")
_NORM_NAMES = {"weight": "gamma", "gamma": "gamma", "bias": "beta", "beta": "beta"}


def _tf_name(key: str) -> str | None:
    """The TF variable name (below ``bert/``) of a PyTorch BERT weight; None for the rest
    (the pooler, position ids)."""
    parts = key.split(".")
    embedding = _EMBEDDING.fullmatch(".".join(parts[:2]))
    if embedding and parts[2:] == ["weight"]:
        table = embedding.group(1)
        return f"embeddings/{table}/" + ("weight" if table == "word_embeddings" else "embeddings")
    if parts[0] not in ("embeddings", "encoder") or len(parts) < 3:
        return None
    if parts[0] == "encoder":
        if parts[1] != "layer":
            return None
        parts = ["encoder", f"layer_._{parts[2]}", *parts[3:]]
    *path, leaf = parts
    if path[-1] == "LayerNorm":
        return "/".join([*path, _NORM_NAMES[leaf]]) if leaf in _NORM_NAMES else None
    if leaf == "weight":
        return "/".join([*path, "kernel"])
    return "/".join([*path, leaf]) if leaf == "bias" else None


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact (erf) GELU BERT uses."""
    z = x * np.float32(1.0 / np.sqrt(2.0))
    a = np.abs(z)
    t = 1.0 / (1.0 + np.float32(_ERF_P) * a)
    a1, a2, a3, a4, a5 = (np.float32(c) for c in _ERF_A)
    poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))))
    erf = np.sign(z) * (1.0 - poly * np.exp(-a * a))
    return np.float32(0.5) * x * (1.0 + erf)
