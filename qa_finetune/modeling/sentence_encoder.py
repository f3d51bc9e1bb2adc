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

The TF model and the transformers tokenizer are loaded on first use: a question alone reads
the folder's ``model.safetensors`` straight into that NumPy pass and its ``tokenizer.json``
with ``tokenizers`` alone, so ``ask --index`` with an ONNX reader embeds its question without
starting TensorFlow or importing transformers (seconds of a cold start between them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from qa_finetune.config.sections import DEFAULT_MODEL
from qa_finetune.libraries.blas_threads import one_blas_thread
from qa_finetune.modeling.families import FAST_TOKENIZER, PT_WEIGHTS
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

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        info: EncoderInfo,
        folder: Path | None = None,
        config: Any = None,
    ) -> None:
        """``model``: the TF model, or None to load it from ``folder`` when a batch needs it
        (``config``: its transformers config, read without TensorFlow)."""
        self._model = model
        self._tokenizer = tokenizer
        self.info = info
        self.folder = folder
        self.config = model.config if model is not None else config
        self._forward: Any = None
        self._single: Any = None  # the NumPy forward pass, made on the first lone text
        self._plain: Any = None  # tokenizer.json alone, for a lone text

    @property
    def tokenizer(self) -> Any:
        """The transformers fast tokenizer, loaded on first use."""
        if self._tokenizer is None:
            assert self.folder is not None, "an encoder without a tokenizer names its folder"
            self._tokenizer = load_tokenizer(self.folder)
        return self._tokenizer

    @property
    def model(self) -> Any:
        """The TF model, loaded (TensorFlow started) on first use."""
        if self._model is None:
            assert self.folder is not None, "an encoder without a model names its folder"
            self._model = tf_encoder(self.folder)
        return self._model

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
        model_config = encoder_config(folder)
        dimension = int(model_config.hidden_size)
        length = min(config.max_length, int(getattr(model_config, "max_position_embeddings", 512)))
        info = EncoderInfo(str(reference), digest, dimension, config.pooling, length)
        if not (folder / FAST_TOKENIZER).is_file():
            load_tokenizer(folder)  # no tokenizer.json: a usable tokenizer, or one line now
        return cls(None, None, info, folder, model_config)

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

            weights = self.folder / PT_WEIGHTS if self.folder is not None else None
            if not numpy_bert.supports(self.config):
                self._single = False
            elif self._model is None and weights is not None and _reads_safetensors(self.folder):
                # The weights tf_encoder would load, read without TensorFlow.
                self._single = numpy_bert.NumpyBert.from_safetensors(self.config, weights)
            else:
                self._single = numpy_bert.NumpyBert.from_tf(self.model)
        return self._single or None

    def _alone(self, text: str) -> np.ndarray:
        """``[1, dimension]``: one text through the NumPy forward pass, unpadded."""
        ids, types, mask = self._question_inputs(text)
        with one_blas_thread():
            hidden = self._single.hidden(ids, types)
            return pool(hidden, mask, self.info.pooling)

    def _question_inputs(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``[1, length]`` ids, type ids and mask of one text, unpadded: from tokenizer.json
        alone while transformers' tokenizer is not loaded (the same pipeline, read by the
        same Rust library), else from that tokenizer."""
        if self._tokenizer is None and self.folder is not None:
            if self._plain is None:
                from tokenizers import Tokenizer

                self._plain = Tokenizer.from_file(str(self.folder / FAST_TOKENIZER))
                self._plain.no_padding()  # a sentence encoder's file may pad to 128
                self._plain.enable_truncation(self.info.max_length)
            encoding = self._plain.encode(text)
            ids = np.asarray([encoding.ids], np.int64)
            return ids, np.asarray([encoding.type_ids], np.int64), np.ones_like(ids)
        encoded = self.tokenizer(
            [text], truncation=True, max_length=self.info.max_length, return_tensors="np"
        )
        mask = encoded["attention_mask"]
        return encoded["input_ids"], encoded.get("token_type_ids", np.zeros_like(mask)), mask

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


def _reads_safetensors(folder: Path | None) -> bool:
    """Whether ``tf_encoder`` loads ``folder``'s weights from its safetensors file."""
    return (
        folder is not None
        and (folder / PT_WEIGHTS).is_file()
        and not (folder / "tf_model.h5").is_file()
    )


def encoder_config(folder: Path) -> Any:
    """The transformers config of the encoder in ``folder`` (no TensorFlow); a BERT's is read
    as JSON with BERT's defaults, without importing transformers."""
    plain = _bert_config(folder)
    if plain is not None:
        return plain
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(folder))
    except (OSError, ValueError, KeyError) as exc:
        raise RetrievalError(
            f"{folder} cannot be loaded as a sentence encoder ({type(exc).__name__}): pass a "
            "sentence-transformers model such as all-MiniLM-L6-v2"
        ) from None


# BertConfig's defaults for the keys the NumPy pass and the index read.
_BERT_DEFAULTS = {
    "hidden_act": "gelu",
    "position_embedding_type": "absolute",
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
}
_BERT_REQUIRED = ("hidden_size", "num_attention_heads", "num_hidden_layers")


def _bert_config(folder: Path) -> SimpleNamespace | None:
    """``config.json`` of a BERT as attributes, or None for any other (or unreadable) one."""
    try:
        values = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(values, dict) or values.get("model_type") != "bert":
        return None
    if any(not isinstance(values.get(key), int) for key in _BERT_REQUIRED):
        return None
    return SimpleNamespace(**{**_BERT_DEFAULTS, **values})


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
