"""Run inside the PyTorch venv: load a model folder with AutoModelForQuestionAnswering.

Usage: python torch_logits.py MODEL_DIR INPUTS.npz OUTPUT.npz. Inputs are the int32 windows;
the output holds start_logits and end_logits. Kept free of qa-finetune imports, so the venv
needs only torch, transformers and safetensors.
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering


def main(model_dir: str, inputs_path: str, output_path: str) -> None:
    model, info = AutoModelForQuestionAnswering.from_pretrained(model_dir, output_loading_info=True)
    model.eval()
    # Every weight in the file must be used and every parameter filled from it.
    if info["missing_keys"] or info["unexpected_keys"] or info["mismatched_keys"]:
        raise SystemExit(f"loading info: {info}")
    with np.load(inputs_path) as data:
        inputs = {name: torch.from_numpy(data[name].astype(np.int64)) for name in data.files}
    with torch.no_grad():
        out = model(**inputs)
    np.savez(output_path, start_logits=out.start_logits.numpy(), end_logits=out.end_logits.numpy())


if __name__ == "__main__":
    main(*sys.argv[1:4])
