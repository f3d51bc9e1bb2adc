"""Private APIs of transformers, tf-keras, datasets and tf2onnx, each behind one function.

qa-finetune reaches into these libraries where no public API does the job; each function says
why and the versions it was checked against, so an upgrade has one file to review. Bottom
layer: every library is imported inside the function that needs it (``core/`` stays free of
TensorFlow).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def tf_qa_head_classes() -> Any:
    """transformers' config class -> TF question-answering class mapping (a lazy mapping:
    ``type(config) in`` it says whether the family has a TF QA head).

    ``TFAutoModelForQuestionAnswering._model_mapping``; checked with transformers 4.57.6
    (TensorFlow classes are gone in 5.x, which the project pins below).
    """
    from transformers import TFAutoModelForQuestionAnswering

    return TFAutoModelForQuestionAnswering._model_mapping


def set_dtype_policy(layer: Any, policy: Any) -> None:
    """Give a built layer another mixed-precision policy (no public setter exists).

    ``Layer._set_dtype_policy``; checked with tf-keras 2.21.
    """
    layer._set_dtype_policy(policy)


def has_indices_mapping(dataset: Any) -> bool:
    """Whether a ``datasets.Dataset`` reads its rows through an indices mapping (after
    ``select``/``shuffle``), so its rows are not its files' rows in order.

    ``Dataset._indices``; checked with datasets 4.x to 5.0.1.
    """
    return dataset._indices is not None


def dataset_fingerprint(dataset: Any) -> str:
    """The fingerprint ``datasets`` caches a dataset's transforms under.

    ``Dataset._fingerprint``; checked with datasets 4.x to 5.0.1.
    """
    return str(dataset._fingerprint)


# The attributes ``save_to_disk`` writes to ``state.json`` (datasets 5.0.1's
# ``Dataset.save_to_disk``), read the same way.
_STATE_KEYS = (
    "_fingerprint",
    "_format_columns",
    "_format_kwargs",
    "_format_type",
    "_output_all_columns",
)


def dataset_state(dataset: Any) -> dict[str, Any]:
    """The ``state.json`` entries ``save_to_disk`` writes from the dataset's attributes.

    ``Dataset.__dict__`` (its private format and fingerprint fields); checked with datasets
    5.0.1.
    """
    return {key: dataset.__dict__[key] for key in _STATE_KEYS}


def dataset_info(dataset: Any) -> Any:
    """The ``DatasetInfo`` object itself, as ``save_to_disk`` serialises it (the public
    ``info`` property returns a copy on some versions).

    ``Dataset._info``; checked with datasets 5.0.1.
    """
    return dataset._info


def tokenizer_cache(tokenizer: Any) -> dict[str, Any]:
    """A dict kept on the tokenizer object for what is built once per tokenizer.

    Kept in the instance's ``__dict__``, past the tokenizer's ``__getattr__``/``__setattr__``
    (which read names as special tokens); it goes when the tokenizer goes. Checked with
    transformers 4.57.6 and tokenizers 0.22.2.
    """
    return tokenizer.__dict__.setdefault("_qa_finetune_encoder", {})


@contextlib.contextmanager
def tf2onnx_passes_free_their_copies() -> Iterator[None]:
    """Within the block, each pass of tf2onnx's ONNX optimizer starts with a garbage collection.

    ``optimize_graph`` deep-copies the whole graph, weights included, before every pass (up to
    twelve passes, repeated until nothing changes) and drops the old copy, whose reference
    cycles only the cyclic collector frees; it ran too rarely to keep up, and exporting a
    22M-parameter MiniLM peaked at 5.6 GB. The objects alive before the block are frozen
    (``gc.freeze``) so that each collection only walks the converter's own. Wraps the entries
    of ``tf2onnx.optimizer._optimizers`` (pass name -> pass class); checked with tf2onnx 1.17.0.
    """
    import gc

    from tf2onnx import optimizer

    passes = optimizer._optimizers
    original = dict(passes)

    def collecting(make_pass: Any) -> Any:
        def make() -> Any:
            gc.collect()
            return make_pass()

        return make

    gc.collect()
    gc.freeze()
    try:
        passes.update({name: collecting(make_pass) for name, make_pass in original.items()})
        yield
    finally:
        passes.update(original)
        gc.unfreeze()
