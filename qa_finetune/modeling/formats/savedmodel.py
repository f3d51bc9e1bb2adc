"""``--format savedmodel``: a TF SavedModel in TF Serving's layout, ``savedmodel/1/``.

TF Serving reads ``--model_base_path`` as a folder of numbered versions and serves the highest;
the export is version ``1``, with ``config.json``, the tokenizer and ``qa_config.json`` beside
it in the base folder (TF Serving skips names that are not numbers). The SavedModel takes
int32 inputs (``serving_default``) and int64 ones (``serving_int64``: what tokenizers return
as numpy arrays).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.modeling.formats.base import OUTPUT_NAMES, ExportFormat, input_names

VERSION = "1"
FILES = [f"{VERSION}/saved_model.pb", f"{VERSION}/variables/"]
# Signature name -> the integer type of its inputs.
SIGNATURES = {"serving_default": "int32", "serving_int64": "int64"}


def serving_function(
    model: Any, names: tuple[str, ...], dtype: str = "int32"
) -> tuple[Any, list[Any]]:
    """A ``tf.function`` of named [batch, length] integer inputs (``dtype``) returning both
    logit tensors; the inputs are cast to int32, the type the model was built with."""
    import tensorflow as tf

    signature = [tf.TensorSpec([None, None], tf.as_dtype(dtype), name=name) for name in names]

    @tf.function(input_signature=signature)
    def serve(*inputs: Any) -> dict[str, Any]:
        features = {name: tf.cast(x, tf.int32) for name, x in zip(names, inputs, strict=True)}
        outputs = model(features, training=False)
        return dict(zip(OUTPUT_NAMES, (outputs.start_logits, outputs.end_logits), strict=True))

    return serve, signature


def saved_model_dir(folder: Path) -> Path:
    """The SavedModel inside an export folder (the version TF Serving serves)."""
    return Path(folder) / VERSION


def write(model: Any, tokenizer: Any, staging: Path, quantize: str | None = None) -> list[str]:
    """The SavedModel of the model's forward over the tokenizer's inputs, as version 1."""
    import tensorflow as tf

    names = input_names(tokenizer)
    signatures = {
        key: serving_function(model, names, dtype)[0] for key, dtype in SIGNATURES.items()
    }
    # A bare module that tracks the weights: saving the Keras model itself would also trace
    # every Keras call function (about 4x slower), which no serving stack uses.
    module = tf.Module()
    module.weights = list(model.weights)
    module.serve = signatures["serving_default"]
    module.serve_int64 = signatures["serving_int64"]
    tf.saved_model.save(module, str(saved_model_dir(staging)), signatures=signatures)
    return list(FILES)


def card_note(folder: Path) -> str:
    """What the card says about an uploaded ``savedmodel/`` folder."""
    return (
        "`savedmodel/` is a TensorFlow SavedModel in TF Serving's layout (version `1/`; "
        "`tensorflow_model_server --model_name=qa --model_base_path=/path/to/savedmodel`): "
        "signature `serving_default` takes int32 `input_ids`, `attention_mask` (and "
        "`token_type_ids` where the model has them), shape [batch, length], `serving_int64` "
        "the same as int64, and both return `start_logits` and `end_logits`; "
        "`qa_config.json` says how to window and decode."
    )


FORMAT = ExportFormat(
    name="savedmodel", help="savedmodel (TF Serving)", write=write, card_note=card_note
)
