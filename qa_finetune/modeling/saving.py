"""A model folder written whole: ``save_pretrained`` of model and tokenizer, swapped in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.files.staged_folders import staged_folder
from qa_finetune.modeling.pt_weights import save_pytorch_safetensors


def save_model_atomic(
    model: Any,
    tokenizer: Any,
    target: Path,
    pytorch_weights: bool = True,
    tf_weights: bool = True,
) -> Path:
    """``save_pretrained`` into a staging folder beside ``target``, then swap it in.

    With ``pytorch_weights`` the folder carries ``model.safetensors`` in PyTorch names, which
    PyTorch, transformers 5 and ``modeling.loading`` load; with ``tf_weights`` also
    ``tf_model.h5``, TensorFlow's own format (one of the two at least).
    """
    if not (pytorch_weights or tf_weights):
        raise ValueError("save_model_atomic needs pytorch_weights or tf_weights")
    with staged_folder(target) as staging:
        if tf_weights:
            model.save_pretrained(str(staging))
        else:
            # config.json as save_pretrained writes it, naming the PyTorch class.
            model.config.architectures = [type(model).__name__.removeprefix("TF")]
            model.config.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        if pytorch_weights:
            save_pytorch_safetensors(model, staging)
    return target
