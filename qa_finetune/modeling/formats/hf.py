"""``--format hf``: a ``save_pretrained`` folder (``tf_model.h5``) that also carries
``model.safetensors`` in PyTorch names, so PyTorch and transformers 5 load it too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.modeling.formats.base import ExportFormat


def write(model: Any, tokenizer: Any, staging: Path, quantize: str | None = None) -> list[str]:
    """The TF model folder, its tokenizer and the PyTorch-named weights."""
    from qa_finetune.modeling.pt_weights import PT_WEIGHTS, save_pytorch_safetensors

    model.save_pretrained(str(staging))
    tokenizer.save_pretrained(str(staging))
    save_pytorch_safetensors(model, staging)
    return ["tf_model.h5", PT_WEIGHTS]


FORMAT = ExportFormat(
    name="hf", help="hf (model folder + PyTorch safetensors)", write=write, serving=False
)
