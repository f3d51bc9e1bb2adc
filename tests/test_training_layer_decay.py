"""Layer-wise learning-rate decay: each variable's rate against a hand computation, on tiny
models of two families, and the refusals before any work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from families import tiny_model

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError

# 2 encoder layers at decay 0.5: head 1, layer 1 0.5, layer 0 0.25, embeddings 0.125.
DECAY = 0.5
HAND = {"head": 1.0, "layer_1": 0.5, "layer_0": 0.25, "embeddings": 0.125}


def _part(key: str) -> str:
    """Which part of the model a variable belongs to, read from its name by hand."""
    if key.startswith("qa_outputs/"):
        return "head"
    for layer in (0, 1):
        if f"/layer_._{layer}/" in key:
            return f"layer_{layer}"
    assert "embeddings" in key, key
    return "embeddings"


def _model(family: str, family_tokenizer: Any) -> Any:
    return tiny_model(family, family_tokenizer(family))


@pytest.mark.parametrize("family", ["bert", "distilbert"])
def test_rate_scales_by_hand(family: str, family_tokenizer: Any) -> None:
    from qa_finetune.training.layer_decay import rate_scales, variable_key

    model = _model(family, family_tokenizer)
    scales = rate_scales([v.name for v in model.weights], DECAY)
    keys = [variable_key(v.name) for v in model.weights]
    assert sorted(scales) == sorted(keys)
    assert {key: scales[key] for key in keys} == {key: HAND[_part(key)] for key in keys}
    # Every part is present: the test would pass on nothing otherwise.
    assert {_part(key) for key in keys} == set(HAND)


@pytest.mark.parametrize("family", ["bert", "distilbert"])
def test_one_adam_step_moves_each_layer_at_its_rate(family: str, family_tokenizer: Any) -> None:
    """With gradients of 1, Adam's first step is rate x 1/(1 + eps/|g|) ~ the rate itself;
    AdamW first takes rate x weight_decay x w off the weights it decays."""
    import tensorflow as tf

    from qa_finetune.training.layer_decay import rate_scales, variable_key
    from qa_finetune.training.schedule import Schedule, build_optimizer

    model = _model(family, family_tokenizer)
    rate, weight_decay = 1e-3, 0.5
    config = Config.from_dict(
        {
            "train": {
                "learning_rate": rate,
                "lr_schedule": "constant",
                "weight_decay": weight_decay,
                "max_grad_norm": None,
                "layer_lr_decay": DECAY,
            }
        }
    )
    scales = rate_scales([v.name for v in model.weights], DECAY)
    optimizer, _ = build_optimizer(config, Schedule(10, 10, 0), scales)
    variables = model.trainable_weights
    before = [v.numpy().copy() for v in variables]
    optimizer.apply_gradients([(tf.ones_like(v), v) for v in variables])
    for variable, old in zip(variables, before, strict=True):
        key = variable_key(variable.name)
        share = HAND[_part(key)] * rate
        decayed = not any(part in key for part in ("LayerNorm", "layer_norm", "bias"))
        expected = old * (1 - share * weight_decay if decayed else 1) - share
        np.testing.assert_allclose(variable.numpy(), expected, rtol=0, atol=share * 1e-3)


def test_without_decay_the_optimizer_is_unchanged() -> None:
    from transformers import AdamWeightDecay

    from qa_finetune.training.schedule import Schedule, build_optimizer

    optimizer, _ = build_optimizer(Config(), Schedule(10, 10, 1))
    assert type(optimizer) is AdamWeightDecay


def test_variable_key_drops_scope_and_replica() -> None:
    from qa_finetune.training.layer_decay import variable_key

    name = "tf_bert_for_question_answering_3/bert/encoder/layer_._1/output/dense/kernel"
    assert variable_key(f"{name}/replica_1:0") == "bert/encoder/layer_._1/output/dense/kernel"
    assert variable_key(f"{name}:0") == "bert/encoder/layer_._1/output/dense/kernel"


def test_mpnet_shared_bias_learns_at_the_embedding_rate() -> None:
    from qa_finetune.training.layer_decay import rate_scales

    names = [
        "m/mpnet/encoder/relative_attention_bias/embeddings:0",
        "m/mpnet/encoder/layer_._0/attention/attn/q/kernel:0",
        "m/mpnet/encoder/layer_._11/output/dense/kernel:0",
        "m/mpnet/embeddings/word_embeddings/weight:0",
        "m/qa_outputs/kernel:0",
    ]
    assert rate_scales(names, 0.9) == {
        "mpnet/encoder/relative_attention_bias/embeddings": pytest.approx(0.9**13),
        "mpnet/encoder/layer_._0/attention/attn/q/kernel": pytest.approx(0.9**12),
        "mpnet/encoder/layer_._11/output/dense/kernel": pytest.approx(0.9),
        "mpnet/embeddings/word_embeddings/weight": pytest.approx(0.9**13),
        "qa_outputs/kernel": 1.0,
    }


def _config_json(folder: Path, model_type: str) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    return folder


@pytest.mark.parametrize("model_type", ["albert", "gpt2"])
def test_models_without_separate_layers_are_refused(tmp_path: Path, model_type: str) -> None:
    from qa_finetune.training.layer_decay import check_layer_decay

    folder = _config_json(tmp_path / model_type, model_type)
    check_layer_decay(1.0, folder)  # off: nothing to check
    with pytest.raises(QAFinetuneError) as caught:
        check_layer_decay(0.8, folder)
    assert str(caught.value) == (
        "train.layer_lr_decay needs a model whose encoder layers are separate weights, and "
        f"model type '{model_type}' has none to tell apart: use a model of another family "
        "(BERT, RoBERTa, DistilBERT, ELECTRA, XLNet, MPNet), or set train.layer_lr_decay=1"
    )


def test_names_without_layers_are_refused() -> None:
    from qa_finetune.training.layer_decay import rate_scales

    with pytest.raises(QAFinetuneError, match=r"^train.layer_lr_decay: no encoder layer"):
        rate_scales(["m/embeddings/word:0", "m/qa_outputs/kernel:0"], 0.9)


@pytest.mark.parametrize("value", [0.0, -0.5, 1.5])
def test_decay_out_of_range_is_refused(value: float) -> None:
    from qa_finetune.config import ConfigError

    with pytest.raises(ConfigError) as caught:
        Config.from_dict({"train": {"layer_lr_decay": value}})
    assert str(caught.value) == (
        "config key 'train.layer_lr_decay': must be in (0, 1] (1 = every layer at the full "
        f"rate), got {value}"
    )


def test_albert_run_is_refused_before_any_work(tmp_path: Path, minilm_dir: Path) -> None:
    """ALBERT's layers share one set of weights: refused before any data or weights load."""
    from tiny_runs import tiny_run_config
    from transformers import AlbertConfig, AutoTokenizer

    from qa_finetune.training.trainer import train

    folder = tmp_path / "albert"
    AlbertConfig(
        vocab_size=64, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64,
    ).save_pretrained(str(folder))  # fmt: skip
    AutoTokenizer.from_pretrained(str(minilm_dir)).save_pretrained(str(folder))
    (folder / "tf_model.h5").write_bytes(b"never read")
    config = tiny_run_config(folder, tmp_path / "runs", max_steps=1, layer_lr_decay=0.8)
    with pytest.raises(QAFinetuneError) as caught:
        train(config)
    assert str(caught.value).startswith(
        "train.layer_lr_decay needs a model whose encoder layers are separate weights, and "
        "model type 'albert' has none to tell apart"
    )
    assert not (tmp_path / "runs").exists()
