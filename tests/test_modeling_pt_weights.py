"""The exported model.safetensors in real PyTorch (``make test-slow`` builds ``.venv-torch``).

TensorFlow and PyTorch never share an interpreter: the TF side writes the model folder and
real windows, and ``tests/torch_logits.py`` runs in the PyTorch venv named by
``QA_FINETUNE_TORCH_PYTHON``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.slow

TORCH_PYTHON = os.environ.get(
    "QA_FINETUNE_TORCH_PYTHON", str(Path(__file__).parents[1] / ".venv-torch" / "bin" / "python")
)


def _real_windows(tokenizer: Any, shared_data: Path) -> dict[str, np.ndarray]:
    """Windows of real SQuAD dev questions and paragraphs, padded to one width."""
    from qa_finetune.features.windows import make_spec, make_windows

    data = json.loads((shared_data / "squad-v1.1-dev.json").read_text(encoding="utf-8"))
    pairs = [
        (qa["question"], paragraph["context"])
        for article in data["data"][:2]
        for paragraph in article["paragraphs"][:3]
        for qa in paragraph["qas"][:2]
    ]
    spec = make_spec(tokenizer, 128, 32)
    built = make_windows(
        {
            "id": [str(i) for i in range(len(pairs))],
            "question": [q for q, _ in pairs],
            "context": [c for _, c in pairs],
        },
        tokenizer,
        spec,
    )
    width = max(len(row) for row in built.encoding["input_ids"])
    out = {}
    for name in ("input_ids", "attention_mask", "token_type_ids"):
        if name not in built.encoding:
            continue
        fill = tokenizer.pad_token_id if name == "input_ids" else 0
        rows = [list(r) + [fill] * (width - len(r)) for r in built.encoding[name]]
        out[name] = np.asarray(rows, dtype=np.int32)
    return out


def _roberta_tokenizer(shared_data: Path, folder: Path) -> Any:
    """A byte-level BPE RobertaTokenizerFast trained offline on real contexts."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    data = json.loads((shared_data / "squad-v1.1-dev.json").read_text(encoding="utf-8"))
    texts = [p["context"] for a in data["data"][:20] for p in a["paragraphs"]]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        texts, vocab_size=2000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    folder.mkdir(parents=True)
    bpe.save_model(str(folder))
    return RobertaTokenizerFast(
        vocab_file=str(folder / "vocab.json"), merges_file=str(folder / "merges.txt")
    )


def _bert(minilm_dir: Path, tmp_path: Path) -> tuple[Any, Any]:
    """The packaged MiniLM encoder (real pretrained weights) with a seeded QA head."""
    import tensorflow as tf

    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.reference import load_tokenizer

    tf.keras.utils.set_random_seed(0)
    return load_qa_model(minilm_dir), load_tokenizer(minilm_dir)


def _roberta(shared_data: Path, tmp_path: Path) -> tuple[Any, Any]:
    import tensorflow as tf
    from transformers import RobertaConfig, TFRobertaForQuestionAnswering

    tf.keras.utils.set_random_seed(0)
    tokenizer = _roberta_tokenizer(shared_data, tmp_path / "bpe")
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=514,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = TFRobertaForQuestionAnswering(config)
    model(model.dummy_inputs)
    return model, tokenizer


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_pytorch_loads_the_exported_weights_with_tf_logits(
    family: str, shared_data: Path, minilm_dir: Path, tmp_path: Path
) -> None:
    if not Path(TORCH_PYTHON).is_file():
        pytest.skip(f"no PyTorch venv at {TORCH_PYTHON}: run make torch-venv")
    from qa_finetune.modeling.saving import save_model_atomic

    model, tokenizer = (
        _bert(minilm_dir, tmp_path) if family == "bert" else _roberta(shared_data, tmp_path)
    )
    folder = save_model_atomic(model, tokenizer, tmp_path / "model")
    inputs = _real_windows(tokenizer, shared_data)
    assert len(inputs["input_ids"]) >= 12
    np.savez(tmp_path / "inputs.npz", **inputs)
    result = subprocess.run(
        [
            TORCH_PYTHON,
            str(Path(__file__).with_name("torch_logits.py")),
            str(folder),
            str(tmp_path / "inputs.npz"),
            str(tmp_path / "out.npz"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    tf_out = model(inputs, training=False)
    with np.load(tmp_path / "out.npz") as torch_out:
        for name in ("start_logits", "end_logits"):
            expected = getattr(tf_out, name).numpy()
            mask = inputs["attention_mask"].astype(bool)  # padded positions are not compared
            diff = np.abs(torch_out[name] - expected)[mask].max()
            print(f"{family} {name}: max abs diff {diff:.2e}")
            assert diff <= 1e-4
