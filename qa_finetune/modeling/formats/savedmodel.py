"""``--format savedmodel``: a TF SavedModel with a ``serving_default`` signature, for TF
Serving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.modeling.formats.base import OUTPUT_NAMES, ExportFormat, input_names

FILES = ["saved_model.pb", "variables/"]


def serving_function(model: Any, names: tuple[str, ...]) -> tuple[Any, list[Any]]:
    """A ``tf.function`` of named int32 [batch, length] inputs returning both logit tensors."""
    import tensorflow as tf

    signature = [tf.TensorSpec([None, None], tf.int32, name=name) for name in names]

    @tf.function(input_signature=signature)
    def serve(*inputs: Any) -> dict[str, Any]:
        outputs = model(dict(zip(names, inputs, strict=True)), training=False)
        return dict(zip(OUTPUT_NAMES, (outputs.start_logits, outputs.end_logits), strict=True))

    return serve, signature


def write(model: Any, tokenizer: Any, staging: Path, quantize: str | None = None) -> list[str]:
    """The SavedModel of the model's forward over the tokenizer's inputs."""
    import tensorflow as tf

    serve, _ = serving_function(model, input_names(tokenizer))
    # A bare module that tracks the weights: saving the Keras model itself would also trace
    # every Keras call function (about 4x slower), which no serving stack uses.
    module = tf.Module()
    module.weights = list(model.weights)
    module.serve = serve
    tf.saved_model.save(module, str(staging), signatures={"serving_default": serve})
    return list(FILES)


def card_note(folder: Path) -> str:
    """What the card says about an uploaded ``savedmodel/`` folder."""
    return (
        "`savedmodel/` is a TensorFlow SavedModel for TF Serving: signature "
        "`serving_default` takes int32 `input_ids`, `attention_mask` (and `token_type_ids` "
        "where the model has them), shape [batch, length], and returns `start_logits` and "
        "`end_logits`; `qa_config.json` says how to window and decode."
    )


FORMAT = ExportFormat(
    name="savedmodel", help="savedmodel (TF Serving)", write=write, card_note=card_note
)
