"""Tune a sentence encoder on question–passage pairs: the multiple-negatives ranking loss
(each question against every passage of its batch, ``training/encoder_batches.py``) with
BM25's hard negatives, AdamW, warm-up then linear decay to zero along the steps or the time
budget, whichever ends first (``training/schedule.ProgressSchedule``, as ``train`` does).

The model trains as sentence-transformers trains it (dropout on, the folder's own pooling,
vectors L2-normalised, cosine x ``scale``), so the tuned folder embeds exactly as it learned,
here (``index --encoder``) and in sentence-transformers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from qa_finetune.retrieval.training_pairs import PairSet
from qa_finetune.training.encoder_batches import ContrastiveBatch, batch_order, contrastive_batch
from qa_finetune.training.schedule import ProgressSchedule


@dataclass(frozen=True)
class TuningSettings:
    """How long and how hard to tune (sentence-transformers' own defaults where it has them:
    learning rate 2e-5, 10% warm-up, weight decay 0.01, scale 20)."""

    epochs: float = 1.0
    batch_size: int = 32
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    scale: float = 20.0
    max_minutes: float | None = None
    seed: int = 42

    def total_steps(self, pairs: int) -> int:
        """Steps of ``epochs`` passes over ``pairs`` pairs (at least one when there are any)."""
        per_epoch = -(-pairs // self.batch_size)
        return max(1, round(self.epochs * per_epoch)) if pairs else 0


@dataclass
class TuningProgress:
    """Where tuning stands after a step (what the command line prints)."""

    step: int
    total: int
    loss: float
    seconds: float


@dataclass(frozen=True)
class TuningResult:
    """What a finished tuning did."""

    steps: int
    planned_steps: int
    seconds: float
    budget_reached: bool
    mean_loss_first: float  # the mean loss of the first tenth of the steps
    mean_loss_last: float  # and of the last tenth


def tf_pool(hidden: tf.Tensor, mask: tf.Tensor, mode: str) -> tf.Tensor:
    """``retrieval.embedding.pool`` in TensorFlow (differentiable): unit vectors per text."""
    hidden = tf.convert_to_tensor(hidden)
    weights = tf.cast(mask, hidden.dtype)[:, :, None]
    if mode == "mean":
        vectors = tf.reduce_sum(hidden * weights, axis=1) / tf.maximum(
            tf.reduce_sum(weights, axis=1), 1e-9
        )
    elif mode == "cls":
        vectors = hidden[:, 0, :]
    elif mode == "max":
        vectors = tf.reduce_max(tf.where(weights > 0, hidden, hidden.dtype.min), axis=1)
    else:
        raise ValueError(f"unknown pooling {mode!r}")
    return tf.math.l2_normalize(vectors, axis=1, epsilon=1e-12)


class EncoderTuner:
    """One optimizer step at a time on a TF sentence encoder (its weights change in place)."""

    def __init__(
        self, model: Any, tokenizer: Any, pooling: str, max_length: int, settings: TuningSettings,
        total_steps: int,
    ) -> None:  # fmt: skip
        from transformers import AdamWeightDecay

        self.model, self.tokenizer = model, tokenizer
        self.pooling, self.max_length, self.settings = pooling, max_length, settings
        self.rate = ProgressSchedule(settings.learning_rate, total_steps, settings.warmup_ratio)
        self.optimizer = AdamWeightDecay(
            learning_rate=self.rate,
            weight_decay_rate=settings.weight_decay,
            exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
            global_clipnorm=settings.max_grad_norm,
        )
        # Families without segment ids (MPNet, DistilBERT) refuse a token_type_ids input.
        self.uses_types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
        spec = tf.TensorSpec([None, None], tf.int32)
        self._step = tf.function(
            self._train_step,
            input_signature=[spec] * 6
            + [tf.TensorSpec([None], tf.int32), tf.TensorSpec([None, None], tf.bool)],
            reduce_retracing=True,
        )

    def encode_inputs(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Token ids, mask and segment ids of ``texts``, padded to the longest."""
        encoded = self.tokenizer(
            list(texts), truncation=True, max_length=self.max_length, padding=True,
            return_tensors="np",
        )  # fmt: skip
        mask = encoded["attention_mask"].astype(np.int32)
        types = encoded.get("token_type_ids", np.zeros_like(mask)).astype(np.int32)
        return encoded["input_ids"].astype(np.int32), mask, types

    def _vectors(self, ids: Any, mask: Any, types: Any) -> tf.Tensor:
        segments = {"token_type_ids": types} if self.uses_types else {}
        out = self.model(input_ids=ids, attention_mask=mask, training=True, **segments)
        return tf_pool(out.last_hidden_state, mask, self.pooling)

    def _train_step(
        self, q_ids: Any, q_mask: Any, q_types: Any, p_ids: Any, p_mask: Any, p_types: Any,
        labels: Any, allowed: Any,
    ) -> tf.Tensor:  # fmt: skip
        with tf.GradientTape() as tape:
            logits = self.settings.scale * tf.matmul(
                self._vectors(q_ids, q_mask, q_types),
                self._vectors(p_ids, p_mask, p_types),
                transpose_b=True,
            )
            logits = tf.where(allowed, logits, tf.constant(-1e9, logits.dtype))
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            )
        variables = self.model.trainable_variables
        grads = tape.gradient(loss, variables)
        # The pooler (BERT's) never reaches the loss: it has no gradient, and nothing to learn.
        used = [(g, v) for g, v in zip(grads, variables, strict=True) if g is not None]
        self.optimizer.apply_gradients(used)
        return loss

    def step(self, batch: ContrastiveBatch, clock_fraction: float = 0.0) -> float:
        """One optimizer step on ``batch``; returns its loss."""
        self.rate.clock_fraction.assign(min(max(clock_fraction, 0.0), 1.0))
        inputs = (*self.encode_inputs(batch.questions), *self.encode_inputs(batch.passages))
        loss = self._step(*inputs, batch.labels.astype(np.int32), batch.allowed)
        return float(loss.numpy())


def tune(
    tuner: EncoderTuner,
    found: PairSet,
    negatives: Sequence[Sequence[int]],
    progress: Callable[[TuningProgress], None] | None = None,
) -> TuningResult:
    """Train ``tuner``'s model on the pairs until the planned steps or the time budget end."""
    settings = tuner.settings
    planned = settings.total_steps(len(found.pairs))
    budget = settings.max_minutes * 60 if settings.max_minutes else None
    losses: list[float] = []
    began = time.perf_counter()
    reached = False
    for chosen in batch_order(len(found.pairs), settings.batch_size, planned, settings.seed):
        elapsed = time.perf_counter() - began
        if budget is not None and elapsed >= budget:
            reached = True
            break
        batch = contrastive_batch(found, negatives, chosen)
        losses.append(tuner.step(batch, elapsed / budget if budget else 0.0))
        if progress is not None:
            progress(TuningProgress(len(losses), planned, losses[-1], time.perf_counter() - began))
    tenth = max(1, len(losses) // 10)
    return TuningResult(
        steps=len(losses),
        planned_steps=planned,
        seconds=time.perf_counter() - began,
        budget_reached=reached,
        mean_loss_first=float(np.mean(losses[:tenth])) if losses else float("nan"),
        mean_loss_last=float(np.mean(losses[-tenth:])) if losses else float("nan"),
    )
