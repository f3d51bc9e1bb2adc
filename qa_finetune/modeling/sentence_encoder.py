"""A sentence-transformers model run with TensorFlow: texts in, unit vectors out, for the
dense half of document search (``index`` embeds passages, ``ask --index`` questions).

The folder is any sentence-transformers model: the installed all-MiniLM-L6-v2 package (the
default), a local folder, or a Hub id downloaded once. Texts are embedded longest first in
batches so each batch pads to similar lengths; the order given is restored.

One text alone (the question of ``ask --index``) is padded to its own length, as a batch
is, and goes through ``modeling/numpy_bert.py`` instead of TensorFlow when the model is a
plain BERT (all-MiniLM-L6-v2 is): TensorFlow's dispatch cost 11-17 ms for a 13-token
question, NumPy on one BLAS thread a few (bench/reports/19-dense-hybrid-retrieval.md). The
vectors agree to 1e-6.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.config.sections import DEFAULT_MODEL
from qa_finetune.libraries.blas_threads import one_blas_thread
from qa_finetune.modeling.families import PT_WEIGHTS
from qa_finetune.modeling.reference import load_tokenizer, resolve_model_dir
from qa_finetune.retrieval.bm25 import RetrievalError
from qa_finetune.retrieval.embedding import (
    EncoderInfo,
    SentenceConfig,
    fingerprint,
    pool,
    sentence_config,
)

# The encoder `index` uses unless told otherwise: the embedded default model, which
# sentence-transformers trained to place a question near the passage that answers it.
DEFAULT_ENCODER = DEFAULT_MODEL
# Texts per forward pass: passages of ~200 words are ~256 tokens; 32 of them is ~10 MB of
# activations per layer, small, and large enough to keep both cores busy.
BATCH_SIZE = 32
_LOADED: dict[tuple[str, str], SentenceEncoder] = {}


class SentenceEncoder:
    """A loaded sentence encoder (``retrieval.embedding.Encoder``)."""

    def __init__(self, model: Any, tokenizer: Any, info: EncoderInfo) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.info = info
        self._forward: Any = None
        self._single: Any = None  # the NumPy forward pass, made on the first lone text

    @classmethod
    def load(cls, reference: str = DEFAULT_ENCODER) -> SentenceEncoder:
        """Load the sentence encoder ``reference`` names; one line when it is not one. A
        process loads each encoder (same files, same fingerprint) once."""
        folder = resolve_model_dir(reference)
        config = sentence_config(folder, reference)  # before any weights are read
        digest = fingerprint(folder, config.pooling)
        cached = _LOADED.get((str(reference), digest))
        if cached is not None:
            return cached
        _LOADED[(str(reference), digest)] = loaded = cls._read(reference, folder, config, digest)
        return loaded

    @classmethod
    def fresh(cls, reference: str = DEFAULT_ENCODER) -> SentenceEncoder:
        """The encoder ``reference`` names with a model of its own, outside the process's
        cache: for training, whose weight changes must not reach other users of the base."""
        folder = resolve_model_dir(reference)
        config = sentence_config(folder, reference)
        return cls._read(reference, folder, config, fingerprint(folder, config.pooling))

    @classmethod
    def _read(
        cls, reference: str, folder: Path, config: SentenceConfig, digest: str
    ) -> SentenceEncoder:
        tokenizer = load_tokenizer(folder)
        model = tf_encoder(folder)
        dimension = int(model.config.hidden_size)
        length = min(config.max_length, int(getattr(model.config, "max_position_embeddings", 512)))
        info = EncoderInfo(str(reference), digest, dimension, config.pooling, length)
        return cls(model, tokenizer, info)

    def encode(
        self,
        texts: Sequence[str],
        progress: Callable[[int], None] | None = None,
        batch_size: int = BATCH_SIZE,
    ) -> np.ndarray:
        """``[len(texts), dimension]`` float32 unit vectors, in the order of ``texts``."""
        if len(texts) == 1 and self._numpy_forward() is not None:
            vector = self._alone(texts[0])
            if progress is not None:
                progress(1)
            return vector
        vectors = np.zeros((len(texts), self.info.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for first in range(0, len(order), batch_size):
            chosen = order[first : first + batch_size]
            vectors[chosen] = self._batch([texts[i] for i in chosen])
            if progress is not None:
                progress(len(chosen))
        return vectors

    def _numpy_forward(self) -> Any:
        """The NumPy forward pass of this model, or None when it is not a plain BERT."""
        if self._single is None:
            from qa_finetune.modeling import numpy_bert

            supported = numpy_bert.supports(self.model.config)
            self._single = numpy_bert.NumpyBert(self.model) if supported else False
        return self._single or None

    def _alone(self, text: str) -> np.ndarray:
        """``[1, dimension]``: one text through the NumPy forward pass, unpadded."""
        encoded = self.tokenizer(
            [text], truncation=True, max_length=self.info.max_length, return_tensors="np"
        )
        mask = encoded["attention_mask"]
        types = encoded.get("token_type_ids", np.zeros_like(mask))
        with one_blas_thread():
            hidden = self._single.hidden(encoded["input_ids"], types)
            return pool(hidden, mask, self.info.pooling)

    def _batch(self, texts: list[str]) -> np.ndarray:
        import tensorflow as tf

        encoded = self.tokenizer(
            texts,
            truncation=True,
            max_length=self.info.max_length,
            padding=True,
            return_tensors="np",
        )
        # Families without segment ids (MPNet, RoBERTa's kind) refuse a token_type_ids input.
        uses_types = "token_type_ids" in getattr(self.tokenizer, "model_input_names", ())
        if self._forward is None:
            model = self.model

            @tf.function(
                input_signature=[tf.TensorSpec([None, None], tf.int32)] * 3, reduce_retracing=True
            )
            def forward(ids: Any, mask: Any, types: Any) -> Any:
                segments = {"token_type_ids": types} if uses_types else {}
                out = model(input_ids=ids, attention_mask=mask, **segments)
                return out.last_hidden_state

            self._forward = forward
        mask = encoded["attention_mask"].astype(np.int32)
        types = encoded.get("token_type_ids", np.zeros_like(mask)).astype(np.int32)
        hidden = self._forward(encoded["input_ids"].astype(np.int32), mask, types).numpy()
        return pool(hidden, mask, self.info.pooling)


def tf_encoder(folder: Path) -> Any:
    """The TF encoder of ``folder`` (TF weights, or PyTorch safetensors copied in)."""
    from transformers import AutoConfig, TFAutoModel

    import qa_finetune.modeling.loading  # noqa: F401  (legacy Keras, quiet transformers)

    try:
        config = AutoConfig.from_pretrained(str(folder))
        if (folder / PT_WEIGHTS).is_file() and not (folder / "tf_model.h5").is_file():
            from safetensors.numpy import load_file
            from transformers.modeling_tf_pytorch_utils import (
                load_pytorch_state_dict_in_tf2_model,
            )

            model = TFAutoModel.from_config(config)
            state = load_file(str(folder / PT_WEIGHTS))
            load_pytorch_state_dict_in_tf2_model(model, state, allow_missing_keys=False)
            return model
        return TFAutoModel.from_pretrained(str(folder))
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise RetrievalError(
            f"{folder} cannot be loaded as a sentence encoder ({type(exc).__name__}): pass a "
            "sentence-transformers model such as all-MiniLM-L6-v2"
        ) from None
