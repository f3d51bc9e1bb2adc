"""Model families: what differs between the encoders qa-finetune fine-tunes, in one place.

Adding a family is one entry in ``FAMILIES`` (and a tokenizer built offline in
``tests/families.py``); the files below are what every family's folder may hold. Plain data,
no imports: ``train`` reads the shape keys for its memory estimate before TensorFlow loads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError

# Weights a model folder may hold: transformers' TF file, safetensors (PyTorch names, as
# qa-finetune writes them beside the TF file), and PyTorch's older pickle.
TF_WEIGHTS = "tf_model.h5"
PT_WEIGHTS = "model.safetensors"
WEIGHT_FILES = (TF_WEIGHTS, PT_WEIGHTS, "pytorch_model.bin")
# What `TFAutoModelForQuestionAnswering.from_pretrained` loads (``push`` requires one).
LOADABLE_WEIGHTS = (TF_WEIGHTS, "*.safetensors", "tf_model.h5.index.json")
# Files a Hub download takes: configs, vocabularies, sentencepiece models, TF weights and
# safetensors; PyTorch .bin files are skipped.
HUB_PATTERNS = ["*.json", "*.txt", "*.model", "*.h5", "*.safetensors", "merges.txt"]

# The Rust tokenizer every fast tokenizer saves (offsets need it; ONNX answering reads it alone).
FAST_TOKENIZER = "tokenizer.json"
# Tokenizer files of every family (WordPiece vocab.txt, BPE vocab.json + merges.txt,
# sentencepiece models); a change in any of them rebuilds the features.
TOKENIZER_FILES = (
    FAST_TOKENIZER,
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "spiece.model",
    "sentencepiece.bpe.model",
)
# At least one of these makes a tokenizer loadable (merges.txt and the special-token map
# only complete one).
TOKENIZER_ANCHORS = tuple(
    name for name in TOKENIZER_FILES if name not in ("merges.txt", "special_tokens_map.json")
)

# The weight-name part of the span-prediction head in every transformers QA architecture
# used here (a checkpoint without it is a base encoder).
QA_HEAD_KEY = "qa_outputs"
# One encoder layer's part of a TF weight name, with its index (a regular expression), in the
# families whose layers can be told apart (``Family.layer_subsets``).
LAYER_PART = r"/layer_\._(\d+)/"


@dataclass(frozen=True)
class Family:
    """One encoder family and the facts the code needs about it."""

    name: str  # as messages name it
    model_types: tuple[str, ...]  # config.json ``model_type`` values
    # config.json names of (layers, hidden size, attention heads, feed-forward size).
    shape_keys: tuple[str, str, str, str] = (
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "intermediate_size",
    )
    # Whether a student may keep some of its encoder layers (``modeling/students``): its TF
    # weights name each layer ``.../layer_._N/...``. ALBERT shares one layer's weights.
    layer_subsets: bool = True


FAMILIES = (
    Family("BERT", ("bert",)),
    Family("RoBERTa", ("roberta", "xlm-roberta")),
    Family("DistilBERT", ("distilbert",), ("n_layers", "dim", "n_heads", "hidden_dim")),
    Family("ALBERT", ("albert",), layer_subsets=False),
    Family("ELECTRA", ("electra",)),
    Family("XLNet", ("xlnet",), ("n_layer", "d_model", "n_head", "d_inner")),
    Family("MPNet", ("mpnet",)),
)


def shape_keys() -> list[tuple[str, str, str, str]]:
    """Each distinct set of config.json shape names, in ``FAMILIES`` order."""
    return list(dict.fromkeys(family.shape_keys for family in FAMILIES))


def suggested(families: tuple[Family, ...] = FAMILIES) -> str:
    """``BERT, RoBERTa, ... or XLNet``: the families a message suggests."""
    names = [family.name for family in families]
    return f"{', '.join(names[:-1])} or {names[-1]}"


def family_of(model_type: str | None) -> Family | None:
    """The family whose config ``model_type`` is ``model_type``; None for another one."""
    return next((family for family in FAMILIES if model_type in family.model_types), None)


def layered_model(model_dir: Path) -> tuple[dict[str, Any], str | None, Family | None]:
    """The ``config.json`` of the model in ``model_dir``, its model type, and its family when
    that family's encoder layers are separate weights (None otherwise: ALBERT shares one
    layer's weights, an unknown family has none known); an unreadable file is one line."""
    try:
        values = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise QAFinetuneError(f"{model_dir}/config.json is unreadable: {exc}") from None
    if not isinstance(values, dict):
        return {}, None, None
    model_type = values.get("model_type")
    family = family_of(model_type)
    return values, model_type, family if family is not None and family.layer_subsets else None


def layered_family_names() -> str:
    """The families whose encoder layers can be chosen or told apart, for error lines."""
    return ", ".join(f.name for f in FAMILIES if f.layer_subsets)
