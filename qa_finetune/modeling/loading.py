"""TensorFlow model loading: the first module in the import graph that imports TensorFlow."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf

# transformers explains at length which head weights are new; qa-finetune reports what matters.
from transformers.utils import logging as hf_logging

from qa_finetune.errors import QAFinetuneError
from qa_finetune.libraries.compat import set_dtype_policy, tf_qa_head_classes
from qa_finetune.modeling.families import PT_WEIGHTS, QA_HEAD_KEY, TF_WEIGHTS, suggested

hf_logging.set_verbosity_error()


class ModelLoadError(QAFinetuneError):
    """The model directory cannot become a TensorFlow question-answering model."""


def has_gpu() -> bool:
    """True when TensorFlow sees at least one GPU."""
    return bool(tf.config.list_physical_devices("GPU"))


def configure_precision(mode: str) -> str:
    """Set the Keras global policy; must run before any model is built.

    ``auto`` means mixed_float16 on a GPU (tensor cores) and float32 elsewhere, where float16
    is slower and less accurate.
    """
    import tf_keras

    use_mixed = mode == "on" or (mode == "auto" and has_gpu())
    policy = "mixed_float16" if use_mixed else "float32"
    tf_keras.mixed_precision.set_global_policy(policy)
    return policy


def _is_pytorch_safetensors(path: Path) -> bool:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        metadata = handle.metadata() or {}
    return metadata.get("format", "pt") == "pt"


def _from_pytorch_safetensors(model_dir: Path, config: Any) -> Any:
    """Build the TF model and copy PyTorch safetensors weights in, without torch.

    transformers 4.57's own TF loader fails on PyTorch-only safetensors; reading the tensors
    with ``safetensors.numpy`` and using its PyTorch-to-TF weight loader works.
    """
    from safetensors.numpy import load_file
    from transformers import TFAutoModelForQuestionAnswering
    from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

    model = TFAutoModelForQuestionAnswering.from_config(config)
    state_dict = load_file(str(model_dir / PT_WEIGHTS))
    _, info = load_pytorch_state_dict_in_tf2_model(
        model, state_dict, allow_missing_keys=True, output_loading_info=True
    )
    # Only the fresh QA head may be missing, and the pooler PyTorch QA checkpoints never hold
    # (TF's MPNet builds one the span logits never read); a missing encoder weight means a
    # wrong checkpoint.
    missing = [k for k in info["missing_keys"] if "qa_outputs" not in k and "/pooler/" not in k]
    if missing:
        raise ModelLoadError(
            f"{model_dir}/model.safetensors lacks {len(missing)} encoder weights "
            f"(first: {missing[0]}); is it a checkpoint of this architecture?"
        )
    return model


def float32_head(model: Any) -> Any:
    """Under mixed precision, let the QA head compute in float32.

    transformers builds its ``qa_outputs`` layer with the global policy, so under
    ``mixed_float16`` the logits and the softmax cross-entropy on them were float16. Keras'
    mixed-precision rule is a float32 last layer: its weights are float32 already, so only
    the compute dtype changes and the outputs (logits, loss) become float32.
    """
    import tf_keras

    head = getattr(model, "qa_outputs", None)
    if head is not None and head.compute_dtype != "float32":
        set_dtype_policy(head, tf_keras.mixed_precision.Policy("float32"))
    return model


def _weight_names(model_dir: Path) -> list[str] | None:
    """Names of the weights stored in ``model_dir``; None when the format is not readable."""
    import h5py
    from safetensors import safe_open

    names: list[str] = []
    index = model_dir / "tf_model.h5.index.json"
    if index.is_file():
        import json

        return list(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}))
    h5 = model_dir / TF_WEIGHTS
    if h5.is_file():
        with h5py.File(h5, "r") as handle:
            handle.visit(names.append)
        return names
    safetensors = model_dir / PT_WEIGHTS
    if safetensors.is_file():
        with safe_open(str(safetensors), framework="numpy") as handle:
            return list(handle.keys())
    return None


def has_trained_qa_head(model_dir: Path) -> bool:
    """Whether the checkpoint in ``model_dir`` holds QA head weights.

    Without them, loading gives a randomly initialised head: the model answers with a score,
    differently on every load, and means nothing (a base encoder, not a QA model).
    Unreadable weight formats count as trained: only a sure miss is reported.
    """
    try:
        names = _weight_names(Path(model_dir))
    except (OSError, ValueError):
        return True
    return names is None or any(QA_HEAD_KEY in name for name in names)


def untrained_head_warning(model_dir: Path) -> str | None:
    """The warning ask, evaluate and serve print for a model without a trained QA head."""
    if has_trained_qa_head(model_dir):
        return None
    return (
        f"warning: {model_dir} has no trained question-answering head; its head is random, so "
        "answers and scores are meaningless and change on every load. Fine-tune it with "
        "`qa-finetune train`, or pass --allow-untrained-head to silence this."
    )


def load_qa_model(model_dir: Path) -> Any:
    """Load ``TFAutoModelForQuestionAnswering`` from a local directory.

    TF weights (``tf_model.h5``) load directly; PyTorch-only safetensors are converted in
    memory. The QA head is freshly initialised when the checkpoint has none, and computes in
    float32 under mixed precision.
    """
    return float32_head(_load_qa_model(model_dir))


def _load_qa_model(model_dir: Path) -> Any:
    from transformers import AutoConfig, TFAutoModelForQuestionAnswering

    try:
        config = AutoConfig.from_pretrained(str(model_dir))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"{model_dir}/config.json is unreadable: {exc}".split("\n")[0]
        ) from exc
    supported = tf_qa_head_classes()  # config class -> TF QA class
    if type(config) not in supported:
        raise ModelLoadError(
            f"model type '{config.model_type}' has no TensorFlow question-answering head; "
            f"use an encoder such as {suggested()}"
        )
    tf_weights = model_dir / TF_WEIGHTS
    safetensors = model_dir / PT_WEIGHTS
    try:
        if tf_weights.is_file():
            # transformers prefers model.safetensors when both exist, and its TF loader fails
            # on the PyTorch-format file that qa-finetune writes beside tf_model.h5.
            return TFAutoModelForQuestionAnswering.from_pretrained(
                str(model_dir), config=config, use_safetensors=False
            )
        if safetensors.is_file() and not _is_pytorch_safetensors(safetensors):
            return TFAutoModelForQuestionAnswering.from_pretrained(str(model_dir), config=config)
        if safetensors.is_file():
            return _from_pytorch_safetensors(model_dir, config)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"cannot load the weights in {model_dir}: {exc}".split("\n")[0]
        ) from exc
    if (model_dir / "pytorch_model.bin").is_file():
        raise ModelLoadError(
            f"{model_dir} only has pytorch_model.bin, which needs torch to read: convert it to "
            "model.safetensors or tf_model.h5"
        )
    raise ModelLoadError(f"{model_dir} has no weights (tf_model.h5 or model.safetensors)")


def make_strategy(name: str) -> tf.distribute.Strategy:
    """The ``tf.distribute`` strategy for a config name; ``auto`` mirrors over several GPUs."""
    if name == "auto":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.MirroredStrategy() if len(gpus) > 1 else tf.distribute.get_strategy()
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        # All GPUs; on a machine without one, all logical CPUs (how tests exercise the path).
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy(devices=[d.name for d in devices])
    if name == "multi_worker":
        # Reads the cluster from the TF_CONFIG environment variable on every worker.
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (ValueError, tf.errors.NotFoundError) as exc:
            raise QAFinetuneError(
                f"no TPU found ({exc}); run on a TPU host or set train.strategy=auto"
            ) from exc
        return tf.distribute.TPUStrategy(resolver)
    raise QAFinetuneError(f"unknown strategy {name!r}")
