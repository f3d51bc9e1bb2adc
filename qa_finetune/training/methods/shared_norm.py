"""``shared_norm``: a question's windows trained with one softmax over all of them.

The standard span loss normalises each window's start and end scores within that window, so
a model learns to find the best span of every window, not whether a window holds the answer
at all: read across 30 windows of a long document, a confident span in a distractor window
wins. Shared normalisation (Clark and Gardner, "Simple and Effective Multi-Paragraph Reading
Comprehension", ACL 2018) makes the scores comparable across windows: per question, with its
windows ``W`` and those holding the answer ``A`` (start and end alike, then averaged),

    loss = logsumexp over w in W, t in w of s[w, t]  -  logsumexp over w in A of s[w, label_w]

With ``data.question_negatives`` a question is also asked of another paragraph of its
document (``<id>#negative``, labelled "no answer"): its windows join the question's softmax,
so the reader learns to score a distractor paragraph's spans below the answer's, as Clark and
Gardner train with paragraphs of the same document. Without them, on paragraph-level data
most questions have one window and the shared softmax is the standard one.

Windows of one question are put side by side in the epoch's order (``epoch_order``), so they
share a batch unless they straddle its end; a question is normalised over its windows in the
batch. A question none of whose windows in the batch holds its answer (an unanswerable one,
or its answer's window in the next batch) keeps the standard loss, with its windows' labels
on the CLS token. The loss of each question is shared equally among its windows, so the
batch mean is the mean over windows that Keras keeps, as for the standard method.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf
from tf_keras.utils import unpack_x_y_sample_weight

from qa_finetune.config import Config
from qa_finetune.data.question_negatives import SUFFIX as NEGATIVE_SUFFIX
from qa_finetune.training.batching import bucketed_order
from qa_finetune.training.methods.base import TrainingMethod, TrainStep
from qa_finetune.training.prepare import CheckedModel, PreparedData
from qa_finetune.training.tf_data import window_lengths

QUESTION_INDEX = "question_index"  # the feature column windows are grouped by
_MASKED = -1e9  # padding's logit: exp() of it is exactly 0 in float32


def _segment_logsumexp(values: Any, segments: Any, count: Any) -> Any:
    """logsumexp of ``values`` [B] within each segment: [count]."""
    peak = tf.math.unsorted_segment_max(values, segments, count)
    shifted = tf.exp(values - tf.gather(peak, segments))
    return tf.math.log(tf.math.unsorted_segment_sum(shifted, segments, count)) + peak


def shared_norm_loss(
    logits: tuple[Any, Any], labels: tuple[Any, Any], mask: Any, questions: Any, holds: Any
) -> tf.Tensor:
    """Per window, in float32: its share of its question's shared-softmax loss (the mean of
    the start and end parts), or its own standard loss when no window of its question in
    the batch holds the answer.

    ``logits``: (start, end) ``[batch, length]``; ``labels``: (start, end) positions;
    ``mask``: 1 on a window's tokens, 0 on padding; ``questions``: each window's question
    number; ``holds``: whether each window holds its answer."""
    real = tf.cast(mask, tf.bool)
    _, segments = tf.unique(tf.reshape(questions, [-1]))
    count = tf.reduce_max(segments) + 1
    ones = tf.ones_like(segments, dtype=tf.float32)
    sizes = tf.gather(tf.math.unsorted_segment_sum(ones, segments, count), segments)
    holding = tf.cast(holds, tf.float32)
    answered = tf.gather(tf.math.unsorted_segment_max(holding, segments, count), segments) > 0
    per_window = tf.zeros_like(ones)
    for scores, label in zip(logits, labels, strict=True):
        scores = tf.where(real, tf.cast(scores, tf.float32), _MASKED)
        window_all = tf.reduce_logsumexp(scores, axis=-1)
        gold = tf.gather(scores, tf.cast(label, tf.int32), batch_dims=1)
        own = window_all - gold
        question_all = _segment_logsumexp(window_all, segments, count)
        gold_held = tf.where(tf.cast(holds, tf.bool), gold, _MASKED)
        question_gold = _segment_logsumexp(gold_held, segments, count)
        shared = tf.gather(question_all - question_gold, segments) / sizes
        per_window += tf.where(answered, shared, own) / 2
    return per_window


def holds_answer(input_ids: Any, labels: tuple[Any, Any], cls_token_id: int) -> tf.Tensor:
    """Whether each window's labels point at a span, not both at its CLS token."""
    cls_position = tf.argmax(tf.cast(tf.equal(input_ids, cls_token_id), tf.int32), axis=-1)
    cls_position = tf.cast(cls_position, tf.int32)
    start, end = (tf.cast(label, tf.int32) for label in labels)
    return tf.logical_not(tf.logical_and(start == cls_position, end == cls_position))


def shared_norm_step(model: Any, cls_token_id: int) -> TrainStep:
    """The train step of ``model`` (compiled) on batches carrying each window's question."""

    def step(batch: Any) -> dict[str, Any]:
        inputs = dict(unpack_x_y_sample_weight(batch)[0])
        labels = (inputs.pop("start_positions"), inputs.pop("end_positions"))
        questions = inputs.pop(QUESTION_INDEX)
        holds = holds_answer(inputs["input_ids"], labels, cls_token_id)
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            logits = (out.start_logits, out.end_logits)
            mask = inputs["attention_mask"]
            per_window = shared_norm_loss(logits, labels, mask, questions, holds)
            # Kept as Keras' running "loss" through the compiled pass-through loss, as the
            # distill step does: progress lines and history read it as the standard loss.
            loss = model.compiled_loss(per_window, per_window)
        model.optimizer.minimize(loss, model.trainable_variables, tape=tape)
        return {metric.name: metric.result() for metric in model.metrics}

    return step


def question_of(example_id: str) -> str:
    """The question an example asks: a question-level negative (``<id>#negative``, the same
    question asked of another paragraph of its document) is its question's, so its windows
    enter that question's softmax as distractors, as Clark and Gardner train."""
    return example_id.removesuffix(NEGATIVE_SUFFIX)


def grouped_order(order: np.ndarray, questions: np.ndarray) -> np.ndarray:
    """``order`` (window indices) with each question's windows moved up beside its first
    one: questions keep the order of their first window, windows their order within."""
    first: dict[int, list[int]] = {}
    for window in order.tolist():
        first.setdefault(int(questions[window]), []).append(window)
    return np.array([w for windows in first.values() for w in windows], dtype=np.int64)


class SharedNorm(TrainingMethod):
    """The span loss normalised over all of a question's windows at once."""

    name = "shared_norm"
    columns = (QUESTION_INDEX,)

    def __init__(self) -> None:
        self.cls_token_id = 0
        self.questions = np.zeros(0, dtype=np.int64)

    def check(self, config: Config, checked: CheckedModel) -> None:
        self.cls_token_id = int(checked.tokenizer.cls_token_id)

    def prepare(self, config: Config, prepared: PreparedData) -> PreparedData:
        """A question number on every window (replay windows' numbered after the run's)."""
        numbers: dict[str, int] = {}
        columns = []
        for windows in (prepared.train, prepared.replay):
            if windows is None:
                columns.append(None)
                continue
            ids = windows.with_format("arrow")[:]["example_id"].to_pylist()
            prefix = "replay:" if columns else ""  # the same id in both is two questions
            columns.append([numbers.setdefault(prefix + question_of(i), len(numbers)) for i in ids])
        self.questions = np.array(columns[0] + (columns[1] or []), dtype=np.int64)
        train = prepared.train.add_column(QUESTION_INDEX, columns[0])
        replay = prepared.replay
        if replay is not None:
            replay = replay.add_column(QUESTION_INDEX, columns[1])
        return dataclasses.replace(prepared, train=train, replay=replay)

    def epoch_order(self, features: Any, order: Any, train: Any, epoch: int) -> Any:
        """The seeded, bucketed order (the epoch's own when it has one), a question's
        windows side by side."""
        if order is None:
            lengths = window_lengths(features)
            order = bucketed_order(
                lengths, train.batch_size, train.seed + epoch, train.length_bucketing
            )
        return grouped_order(np.asarray(order), self.questions)

    def train_step(self, model: Any) -> TrainStep | None:
        return shared_norm_step(model, self.cls_token_id)

    def record(self) -> dict[str, Any]:
        return {"method": self.name}


METHOD = SharedNorm
