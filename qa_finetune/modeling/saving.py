"""Model folders written whole or not at all (staged beside the target, then swapped in): a
QA model's (``save_pretrained`` of model and tokenizer) and a tuned sentence encoder's.

A tuned encoder's folder keeps its base's sentence-transformers files (``modules.json``, the
pooling and length settings), so ``index --encoder`` here and ``SentenceTransformer(folder)``
in PyTorch read it as they read the base; the weights are ``model.safetensors`` in PyTorch
names (checked by a round trip, no torch needed), the tokenizer is the base's, and
``tuning.json`` says what it was tuned on and how well it finds passages before and after.
"""

from __future__ import annotations

import json
import shutil
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
            _save_config(model, staging)
        tokenizer.save_pretrained(str(staging))
        if pytorch_weights:
            save_pytorch_safetensors(model, staging)
    return target


TUNING_RECORD = "tuning.json"
# Files of the base folder that describe the base, not the tuned encoder: its weights (written
# anew), its model card and training-data notes, and a record of an earlier tuning.
_NOT_CARRIED = {
    "model.safetensors",
    "tf_model.h5",
    "pytorch_model.bin",
    "flax_model.msgpack",
    "rust_model.ot",
    "README.md",
    "data_config.json",
    ".gitattributes",
    TUNING_RECORD,
}
_NOT_CARRIED_FOLDERS = {"onnx", "openvino", ".cache"}


def save_sentence_encoder(
    model: Any, tokenizer: Any, base: Path, target: Path, record: dict[str, Any]
) -> Path:
    """Write the tuned ``model`` to ``target`` with ``base``'s sentence-transformers files."""
    with staged_folder(Path(target)) as staging:
        for item in Path(base).iterdir():
            if item.is_dir() and item.name not in _NOT_CARRIED_FOLDERS:
                shutil.copytree(item, staging / item.name)
            elif item.is_file() and item.name not in _NOT_CARRIED:
                shutil.copy2(item, staging / item.name)
        _save_config(model, staging)
        tokenizer.save_pretrained(str(staging))
        # The pooler too: the base's file has it, and a loader that wants every weight
        # (this one's, PyTorch's AutoModel) would otherwise miss it.
        save_pytorch_safetensors(model, staging, keep_pooler=True)
        text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
        (staging / TUNING_RECORD).write_text(text, encoding="utf-8")
    return Path(target)


def _save_config(model: Any, folder: Path) -> None:
    """``config.json`` as ``save_pretrained`` writes it, naming the PyTorch class: the folder's
    weights are PyTorch's, which PyTorch and transformers 5 load by that name."""
    model.config.architectures = [type(model).__name__.removeprefix("TF")]
    model.config.save_pretrained(str(folder))
