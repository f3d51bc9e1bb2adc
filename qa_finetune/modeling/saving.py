"""A model folder written whole: ``save_pretrained`` of model and tokenizer, swapped in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.modeling.pt_weights import save_pytorch_safetensors
from qa_finetune.staged_folders import staged_folder


def save_model_atomic(
    model: Any, tokenizer: Any, target: Path, pytorch_weights: bool = True
) -> Path:
    """``save_pretrained`` into a staging folder beside ``target``, then swap it in.

    With ``pytorch_weights`` the folder also carries ``model.safetensors`` in PyTorch names,
    so PyTorch and transformers 5 load it as well as TensorFlow does ``tf_model.h5``.
    """
    with staged_folder(target) as staging:
        model.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        if pytorch_weights:
            save_pytorch_safetensors(model, staging)
    return target
