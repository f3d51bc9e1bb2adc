"""TF Keras weights -> ``model.safetensors`` in PyTorch parameter names and layout, no torch.

transformers maps names both ways (``convert_tf_weight_name_to_pt_weight_name``) and says
which kernels PyTorch stores transposed; the tensors are written with ``safetensors.numpy``,
tagged ``format: pt`` as ``save_pretrained`` of a PyTorch model would tag them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import give_usual_mode
from qa_finetune.modeling.families import PT_WEIGHTS


class UnsupportedArchitectureError(QAFinetuneError):
    """The model cannot be written in the requested format."""


def unused_by_pytorch_qa(name: str) -> bool:
    """Whether a PyTorch-named weight is one PyTorch's QA classes do not have.

    TensorFlow's MPNet QA model builds a pooler that ``MPNetForQuestionAnswering`` leaves out
    (``add_pooling_layer=False``, like every PyTorch QA class here): written out, transformers
    5 reports it as an unexpected key, and a PyTorch QA checkpoint never holds one. The span
    logits never read it.
    """
    return ".pooler." in f".{name}"


def _pt_layout(array: np.ndarray, transpose: Any) -> np.ndarray:
    """Reorder a TF kernel to PyTorch's layout (dense: [out, in]; convolutions: [out, in, k])."""
    from transformers.modeling_tf_pytorch_utils import TransposeType

    if transpose is TransposeType.SIMPLE:
        array = array.T
    elif transpose is TransposeType.CONV1D:
        array = array.transpose(2, 1, 0)
    elif transpose is TransposeType.CONV2D:
        array = array.transpose(3, 2, 0, 1)
    return np.ascontiguousarray(array)


def pytorch_state_dict(model: Any, keep_pooler: bool = False) -> dict[str, np.ndarray]:
    """The weights of a built TF model as a PyTorch ``state_dict`` of float32 numpy arrays;
    the pooler only with ``keep_pooler`` (a base model's, which PyTorch's ``AutoModel`` has)."""
    from transformers.modeling_tf_pytorch_utils import convert_tf_weight_name_to_pt_weight_name

    state: dict[str, np.ndarray] = {}
    for weight in model.weights:
        name, transpose = convert_tf_weight_name_to_pt_weight_name(
            weight.name, start_prefix_to_remove="", tf_weight_shape=weight.shape
        )
        if unused_by_pytorch_qa(name) and not keep_pooler:
            continue
        if name in state:
            raise UnsupportedArchitectureError(
                f"{type(model).__name__}: two TF weights map to the PyTorch name {name}; this "
                "architecture cannot be exported to PyTorch safetensors (use --format savedmodel)"
            )
        state[name] = _pt_layout(np.asarray(weight.numpy(), dtype=np.float32), transpose)
    return state


def check_round_trip(model: Any, state: dict[str, np.ndarray]) -> None:
    """Load ``state`` back through transformers' PyTorch-to-TF loader into a fresh model.

    Every tensor must be used and every TF weight filled with the same values, or the names
    do not follow PyTorch's layout for this architecture.
    """
    import tensorflow as tf
    from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

    if tf.distribute.has_strategy() and isinstance(
        tf.distribute.get_strategy(), tf.distribute.MultiWorkerMirroredStrategy
    ):
        # Inside a multi-worker scope (the chief saving its best model during validation) a
        # new model's variables start collectives the other workers never join. Saves outside
        # that scope (the end of training, export) are checked.
        return
    fresh = type(model)(model.config)
    fresh(fresh.dummy_inputs, training=False)
    _, info = load_pytorch_state_dict_in_tf2_model(
        fresh, state, allow_missing_keys=True, output_loading_info=True
    )
    missing = [key for key in info["missing_keys"] if not _is_pooler_weight(key)]
    problems = missing + info["unexpected_keys"] + info["mismatched_keys"]
    if problems:
        raise UnsupportedArchitectureError(
            f"{type(model).__name__}: PyTorch names do not round-trip ({len(problems)} "
            f"mismatches, first: {problems[0]}); export it with --format savedmodel or onnx"
        )
    for original, loaded in zip(model.weights, fresh.weights, strict=True):
        if _is_pooler_weight(original.name):
            continue  # left out on purpose (unused_by_pytorch_qa)
        if not np.array_equal(original.numpy(), loaded.numpy()):
            raise UnsupportedArchitectureError(
                f"{type(model).__name__}: weight {original.name} changes in the PyTorch "
                "round trip; export it with --format savedmodel or onnx"
            )


def _is_pooler_weight(tf_name: str) -> bool:
    """A TF weight name (``.../mpnet/pooler/dense/kernel:0``) of the pooler PyTorch lacks."""
    return "/pooler/" in tf_name


def save_pytorch_safetensors(model: Any, folder: Path, keep_pooler: bool = False) -> Path:
    """Write ``folder/model.safetensors`` (PyTorch names, checked by a round trip)."""
    from safetensors.numpy import save_file

    state = pytorch_state_dict(model, keep_pooler)
    check_round_trip(model, state)
    path = Path(folder) / PT_WEIGHTS
    save_file(state, str(path), metadata={"format": "pt"})
    # safetensors writes through a private temporary file: 0600 whatever the umask.
    return give_usual_mode(path)
