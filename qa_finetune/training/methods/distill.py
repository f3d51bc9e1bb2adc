"""``distill``: a student learns from the answer labels and from a teacher run's start/end
logits on the same windows (``train.teacher``), optionally starting as a subset of the
teacher's own layers (``train.student_layers``).

Per window, with alpha = ``train.distill_alpha`` and T = ``train.distill_temperature``:

    loss = (1 - alpha) * span + alpha * T^2 * KL(softmax(teacher / T) || softmax(student / T))

each term the mean of its start and end parts. The teacher's logits are computed once and
cached beside the features (``training/teacher_logits``); batches carry each window's index
and look its logits up, whatever the epoch's order. The student is an ordinary run.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tensorflow as tf
from tf_keras.utils import unpack_x_y_sample_weight

from qa_finetune.config import Config
from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.loading import load_qa_model
from qa_finetune.modeling.reference import load_tokenizer, resolve_model_dir
from qa_finetune.modeling.students import chosen_layers, student_from_layers, teacher_layers
from qa_finetune.training.methods.base import TrainingMethod, TrainStep
from qa_finetune.training.prepare import CheckedModel, PreparedData
from qa_finetune.training.teacher import Teacher, check_teacher, find_teacher, teacher_digest
from qa_finetune.training.teacher_logits import TeacherLogits, teacher_logits
from qa_finetune.training.token_bridge import TokenBridge

log = logging.getLogger(__name__)

WINDOW_INDEX = "window_index"  # the feature column batches find their teacher logits by
TEACHER_START, TEACHER_END = "teacher_start_logits", "teacher_end_logits"
# Padding's logit in both softmaxes: exp() of it is exactly 0 in float32, whatever T is.
_MASKED = -1e9


def distill_loss(
    student: tuple[Any, Any],
    teacher: tuple[Any, Any],
    labels: tuple[Any, Any],
    mask: Any,
    alpha: float,
    temperature: float,
) -> tf.Tensor:
    """Per window: ``(1 - alpha) * span + alpha * T^2 * KL(teacher_T || student_T)``, each
    the mean of its start and end terms, in float32 (mixed precision included).

    ``student``, ``teacher``: (start, end) logits ``[batch, length]``; ``labels``: (start,
    end) positions; ``mask``: 1 on a window's tokens, 0 on the batch's padding. Padding is
    out of every softmax, the span loss's too: how much of it a batch has depends on its
    other windows, not on this one, and a label never points into it.
    """
    real = tf.cast(mask, tf.bool)
    per_window = tf.zeros(tf.shape(real)[:1], tf.float32)
    for ours, theirs, label in zip(student, teacher, labels, strict=True):
        ours = tf.where(real, tf.cast(ours, tf.float32), _MASKED)
        theirs = tf.where(real, tf.cast(theirs, tf.float32), _MASKED)
        span = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=ours)
        known = tf.nn.log_softmax(theirs / temperature)
        guess = tf.nn.log_softmax(ours / temperature)
        kl = tf.reduce_sum(tf.exp(known) * (known - guess), axis=-1)
        per_window += ((1 - alpha) * span + alpha * temperature**2 * kl) / 2
    return per_window


def distill_step(model: Any, alpha: float, temperature: float) -> TrainStep:
    """The train step of ``model`` (compiled) on batches carrying the teacher's logits."""

    def step(batch: Any) -> dict[str, Any]:
        inputs = dict(unpack_x_y_sample_weight(batch)[0])  # fit's dict, or (dict,)
        labels = (inputs.pop("start_positions"), inputs.pop("end_positions"))
        teacher = (inputs.pop(TEACHER_START), inputs.pop(TEACHER_END))
        inputs.pop(WINDOW_INDEX)
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            student = (out.start_logits, out.end_logits)
            mask = inputs["attention_mask"]
            per_window = distill_loss(student, teacher, labels, mask, alpha, temperature)
            # Through the model's compiled loss (transformers' pass-through without a loss
            # argument): the batch mean, kept as Keras' running "loss", so progress lines,
            # history and checkpoints read it as they read the standard loss.
            loss = model.compiled_loss(per_window, per_window)
        model.optimizer.minimize(loss, model.trainable_variables, tape=tape)
        return {metric.name: metric.result() for metric in model.metrics}

    return step


class Distill(TrainingMethod):
    """Learns from a teacher's soft start/end distributions as well as from the labels."""

    name = "distill"
    columns = (WINDOW_INDEX,)

    def __init__(self, config: Config, teacher: Teacher) -> None:
        self.settings = config.train
        self.teacher = teacher
        self.logits: TeacherLogits | None = None  # set by prepare
        self.bridge: TokenBridge | None = None  # set by check: another tokenizer's ids

    @classmethod
    def for_run(cls, config: Config, run_dir: Path) -> TrainingMethod:
        train = config.train
        return cls(config, find_teacher(train.teacher or "", train.output_dir, run_dir))

    def configure(self, config: Config, requested: Mapping[str, Any]) -> Config:
        """With ``train.student_layers`` the student's model is the teacher's folder (so its
        tokenizer and windows too); an explicit model must be the teacher's."""
        if self.settings.student_layers is None:
            return config
        if config.model.init_from:
            raise QAFinetuneError(
                "train.student_layers starts the student from the teacher's layers and "
                "model.init_from from another run's weights: choose one"
            )
        asked = (requested.get("model") or {}).get("name_or_path")
        if asked and not self._teachers_model(asked, config.model.revision):
            raise QAFinetuneError(
                f"train.student_layers builds the student from the layers of teacher "
                f"{self.teacher.reference}, so --model {asked} (another model) is not used: "
                "drop --model, or drop train.student_layers to distill into that model"
            )
        model = dataclasses.replace(
            config.model, name_or_path=str(self.teacher.model_dir), revision=None
        )
        return dataclasses.replace(config, model=model)

    def _teachers_model(self, reference: str, revision: str | None) -> bool:
        """Whether ``reference`` is the teacher's model folder, or one with its tokenizer."""
        model_dir = resolve_model_dir(reference, revision)
        if model_dir.resolve() == self.teacher.model_dir.resolve():
            return True
        ours, theirs = load_tokenizer(model_dir), load_tokenizer(self.teacher.model_dir)
        return type(ours) is type(theirs) and ours.get_vocab() == theirs.get_vocab()

    def check(self, config: Config, checked: CheckedModel) -> None:
        self.bridge = check_teacher(self.teacher, config, checked.tokenizer)
        if self.settings.student_layers is not None:
            chosen_layers(self.settings.student_layers, teacher_layers(self.teacher.model_dir))

    def prepare(self, config: Config, prepared: PreparedData) -> PreparedData:
        """The teacher's logits of every training window (cached), and a window index column
        on the windows (replay windows counted after the run's own)."""
        windows = [prepared.train]
        fingerprints = [prepared.fingerprint]
        if prepared.replay is not None:
            windows.append(prepared.replay)
            fingerprints.append(prepared.replay_fingerprint or "replay")
        batch = config.inference.batch_size
        self.logits = teacher_logits(
            self.teacher, windows, fingerprints, prepared.cache_dir, batch, self.bridge
        )
        count = len(prepared.train)
        train = prepared.train.add_column(WINDOW_INDEX, list(range(count)))
        replay = prepared.replay
        if replay is not None:
            replay = replay.add_column(WINDOW_INDEX, list(range(count, count + len(replay))))
        return dataclasses.replace(prepared, train=train, replay=replay)

    def initial_model(self) -> Any | None:
        """With ``train.student_layers``: the teacher's chosen layers, as a smaller model."""
        spec = self.settings.student_layers
        if spec is None:
            return None
        layers = chosen_layers(spec, teacher_layers(self.teacher.model_dir))
        teacher = load_qa_model(self.teacher.model_dir)
        log.info("student: layers %s of teacher %s", layers, self.teacher.name)
        return student_from_layers(teacher, layers)

    def train_step(self, model: Any) -> TrainStep | None:
        train = self.settings
        return distill_step(model, train.distill_alpha, train.distill_temperature)

    def batches(self, dataset: Any) -> Any:
        """Each batch with its windows' teacher logits, padded as its inputs are."""
        logits = self.logits
        assert logits is not None, "prepare() computes the teacher's logits first"

        def add(batch: dict[str, Any]) -> dict[str, Any]:
            width = tf.shape(batch["input_ids"])[1]
            index = batch[WINDOW_INDEX]
            # A pure lookup (stateful=False): tf.data may run it under op determinism.
            found = tf.numpy_function(
                logits.padded, [index, width], [tf.float16, tf.float16], stateful=False
            )
            for tensor in found:
                tensor.set_shape([None, None])
            return {**batch, TEACHER_START: found[0], TEACHER_END: found[1]}

        return dataset.map(add)

    def record(self) -> dict[str, Any]:
        teacher = self.teacher
        layers = self.settings.student_layers
        return {
            "method": self.name,
            "teacher": {
                "reference": teacher.reference,
                "run": teacher.run_dir.name if teacher.run_dir is not None else None,
                "model": str(teacher.model_dir),
                "sha256": teacher_digest(teacher),
            },
            "student_layers": list(range(layers)) if isinstance(layers, int) else layers,
        }


METHOD = Distill
