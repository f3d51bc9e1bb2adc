"""Distillation's parts: the loss against a hand computation, students made of a teacher's
layers, and the teacher-logit cache (reused, and computed again when its inputs change)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from tiny_runs import tiny_run_config

from qa_finetune.errors import QAFinetuneError

RNG = np.random.default_rng(0)
# Two windows padded to 6 positions: the first has 4 tokens, the second all 6.
MASK = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
LABELS = (np.array([1, 5]), np.array([2, 5]))


def _logits() -> tuple[np.ndarray, np.ndarray]:
    return RNG.normal(size=(2, 6)).astype(np.float32), RNG.normal(size=(2, 6)).astype(np.float32)


def _log_softmax(row: np.ndarray) -> np.ndarray:
    shifted = row - row.max()
    return shifted - np.log(np.exp(shifted).sum())


def _by_hand(student: tuple, teacher: tuple, alpha: float, temperature: float) -> np.ndarray:
    """The loss per window, position by position over each window's own tokens."""
    losses = []
    for window, mask in enumerate(MASK.astype(bool)):
        total = 0.0
        for ours, theirs, labels in zip(student, teacher, LABELS, strict=True):
            s, t = ours[window][mask], theirs[window][mask]
            span = -_log_softmax(s)[labels[window]]
            p_t = np.exp(_log_softmax(t / temperature))
            kl = np.sum(p_t * (_log_softmax(t / temperature) - _log_softmax(s / temperature)))
            total += ((1 - alpha) * span + alpha * temperature**2 * kl) / 2
        losses.append(total)
    return np.array(losses)


def _loss(student: tuple, teacher: tuple, alpha: float, temperature: float) -> np.ndarray:
    from qa_finetune.training.methods.distill import distill_loss

    return distill_loss(student, teacher, LABELS, MASK, alpha, temperature).numpy()


def test_the_kl_term_is_zero_when_student_and_teacher_agree() -> None:
    student = _logits()
    np.testing.assert_allclose(_loss(student, student, 1.0, 2.0), 0.0, atol=1e-6)
    # Only the padding differs: it is in neither softmax.
    teacher = tuple(np.where(MASK == 1, s, s + 50.0) for s in student)
    np.testing.assert_allclose(_loss(student, teacher, 1.0, 3.0), 0.0, atol=1e-6)


@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.0])
def test_the_loss_is_the_span_loss_at_alpha_0_and_t2_kl_at_alpha_1(temperature: float) -> None:
    student, teacher = _logits(), _logits()
    for alpha in (0.0, 1.0, 0.3):
        expected = _by_hand(student, teacher, alpha, temperature)
        np.testing.assert_allclose(_loss(student, teacher, alpha, temperature), expected, rtol=1e-5)
    # alpha 0 is the span loss alone: the teacher does not matter.
    np.testing.assert_allclose(
        _loss(student, teacher, 0.0, temperature), _loss(student, _logits(), 0.0, temperature)
    )


def test_the_loss_is_float32_from_float16_logits() -> None:
    student, teacher = _logits(), _logits()
    halves = tuple(t.astype(np.float16) for t in teacher)
    loss = _loss(student, halves, 0.5, 2.0)
    assert loss.dtype == np.float32
    np.testing.assert_allclose(loss, _by_hand(student, halves, 0.5, 2.0), rtol=1e-3)


def _deep_model(family: str, tokenizer: Any, layers: int) -> Any:
    """A random tiny QA model of ``family`` with ``layers`` encoder layers."""
    import tensorflow as tf
    from transformers import (
        BertConfig,
        DistilBertConfig,
        TFBertForQuestionAnswering,
        TFDistilBertForQuestionAnswering,
    )

    tf.keras.utils.set_random_seed(1)
    if family == "bert":
        config = BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=layers,
            num_attention_heads=2,
            intermediate_size=64,
        )
        model = TFBertForQuestionAnswering(config)
    else:
        config = DistilBertConfig(
            vocab_size=len(tokenizer), dim=32, n_layers=layers, n_heads=2, hidden_dim=64
        )
        model = TFDistilBertForQuestionAnswering(config)
    model(model.dummy_inputs)
    return model


def _weights(model: Any, part: str) -> list[np.ndarray]:
    return [w.numpy() for w in model.weights if f"/{part}/" in w.name]


def _forward(model: Any, tokenizer: Any) -> np.ndarray:
    encoded = tokenizer("Who wrote it?", "It was written by Ada in 1843.", return_tensors="tf")
    # DistilBERT takes no type ids; BERT's are all 0 for this check.
    output = model({k: v for k, v in encoded.items() if k in ("input_ids", "attention_mask")})
    return np.concatenate([output.start_logits.numpy(), output.end_logits.numpy()])


@pytest.mark.parametrize(
    ("family", "layers_key"), [("bert", "encoder"), ("distilbert", "transformer")]
)
def test_a_student_copies_the_chosen_layers_and_all_layers_give_the_teacher(
    family: str, layers_key: str, family_tokenizer: Any
) -> None:
    from qa_finetune.modeling.students import student_from_layers

    tokenizer = family_tokenizer(family)
    teacher = _deep_model(family, tokenizer, 4)
    student = student_from_layers(teacher, [0, 2, 3])
    assert student.config.num_hidden_layers == 3
    for ours, theirs in ((0, 0), (1, 2), (2, 3)):
        mine = _weights(student, f"{layers_key}/layer_._{ours}")
        assert mine and len(mine) == len(_weights(teacher, f"{layers_key}/layer_._{theirs}"))
        for a, b in zip(mine, _weights(teacher, f"{layers_key}/layer_._{theirs}"), strict=True):
            np.testing.assert_array_equal(a, b)
    for part in ("embeddings", "qa_outputs"):
        for a, b in zip(_weights(student, part), _weights(teacher, part), strict=True):
            np.testing.assert_array_equal(a, b)
    assert not _weights(student, f"{layers_key}/layer_._3")
    whole = student_from_layers(teacher, [0, 1, 2, 3])
    np.testing.assert_allclose(_forward(whole, tokenizer), _forward(teacher, tokenizer), atol=1e-6)
    assert np.abs(_forward(student, tokenizer) - _forward(teacher, tokenizer)).max() > 1e-4


def test_bad_layer_indexes_and_a_family_without_layers_are_one_line(tmp_path: Path) -> None:
    from qa_finetune.modeling.students import chosen_layers, teacher_layers

    assert chosen_layers(3, 6) == [0, 1, 2] and chosen_layers([1, 4], 6) == [1, 4]
    for spec in ([0, 6], 7):
        with pytest.raises(QAFinetuneError) as raised:
            chosen_layers(spec, 6)
        assert "choose among 0 to 5" in str(raised.value) and "\n" not in str(raised.value)
    (tmp_path / "config.json").write_text('{"model_type": "albert", "num_hidden_layers": 12}')
    with pytest.raises(QAFinetuneError, match="albert teacher has no encoder layers to choose"):
        teacher_layers(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "distilbert", "n_layers": 6}')
    assert teacher_layers(tmp_path) == 6


def _prepared(model_dir: Path, output_dir: Path, samples: int = 16) -> Any:
    from qa_finetune.training.prepare import prepare

    return prepare(tiny_run_config(model_dir, output_dir, train_samples=samples))


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record the teacher folder of each teacher run."""
    from qa_finetune.training import teacher_logits

    calls: list[Path] = []
    original = teacher_logits._run_teacher

    def run(teacher: Any, *args: Any) -> Any:
        calls.append(teacher.model_dir)
        return original(teacher, *args)

    monkeypatch.setattr(teacher_logits, "_run_teacher", run)
    return calls


def test_teacher_logits_are_cached_and_computed_again_when_teacher_or_features_change(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.predict import predict_features
    from qa_finetune.training.teacher import find_teacher
    from qa_finetune.training.teacher_logits import teacher_logits

    calls = _counting(monkeypatch)
    prepared = _prepared(tiny_model_dir, tmp_path)
    teacher = find_teacher(str(tiny_model_dir), str(tmp_path), tmp_path / "tiny")

    def logits(which: Any = teacher, features: Any = prepared) -> Any:
        windows, fingerprint = [features.train], [features.fingerprint]
        return teacher_logits(which, windows, fingerprint, features.cache_dir, 8)

    first, second = logits(), logits()
    assert calls == [tiny_model_dir] and not first.reused and second.reused
    assert second.folder == first.folder and first.folder.parent.parent == prepared.cache_dir
    assert first.start.dtype == np.float16 and len(first.start) == first.offsets[-1]
    # Any order of windows finds its own rows: each equals the teacher's logits of it.
    start, end = predict_features(load_qa_model(tiny_model_dir), prepared.train, 8)
    order = np.array([5, 0, 3])
    width = start.shape[1] + 8
    ours = second.padded(order, width)
    for row, window in enumerate(order):
        size = int(second.offsets[window + 1] - second.offsets[window])
        np.testing.assert_allclose(ours[0][row, :size], start[window, :size], rtol=2e-3, atol=2e-3)
        np.testing.assert_allclose(ours[1][row, :size], end[window, :size], rtol=2e-3, atol=2e-3)
        assert (ours[0][row, size:] < -1e3).all()

    # Another teacher (other weights): computed again, in a folder of its own.
    other_dir = tmp_path / "other-teacher"
    shutil.copytree(tiny_model_dir, other_dir)
    model = load_qa_model(other_dir)
    head = model.qa_outputs.kernel
    head.assign(head.numpy() * 2)
    model.save_pretrained(str(other_dir))
    other = logits(find_teacher(str(other_dir), str(tmp_path), tmp_path / "tiny"))
    assert calls == [tiny_model_dir, other_dir] and other.folder != first.folder
    # Other features (fewer questions): computed again, beside those features.
    fewer = _prepared(tiny_model_dir, tmp_path, samples=8)
    assert fewer.fingerprint != prepared.fingerprint
    again = logits(features=fewer)
    assert calls[-1] == tiny_model_dir and len(calls) == 3 and not again.reused
    assert again.folder.parent.parent == fewer.cache_dir


def test_a_mixed_precision_distillation_step_scales_its_float32_loss(tiny_model_dir: Path) -> None:
    import tf_keras

    from qa_finetune.config import Config
    from qa_finetune.modeling.loading import configure_precision
    from qa_finetune.training.methods.distill import distill_step
    from qa_finetune.training.schedule import Schedule
    from qa_finetune.training.trainer import Trainer

    configure_precision("on")
    try:
        trainer = Trainer(Config())
        trainer.prepared = SimpleNamespace(model_dir=tiny_model_dir)  # type: ignore[assignment]
        trainer.schedule = Schedule(4, 4, 0)
        model = trainer.build_model()
        assert isinstance(model.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
        model.train_step = distill_step(model, 0.5, 2.0)
        model.run_eagerly = True  # one step runs faster eagerly than traced
        teacher = _logits()
        batch = {
            "input_ids": np.array([[101, 2054, 102, 2009, 2001, 102]] * 2),
            "attention_mask": MASK,
            "start_positions": LABELS[0],
            "end_positions": LABELS[1],
            "teacher_start_logits": teacher[0].astype(np.float16),
            "teacher_end_logits": teacher[1].astype(np.float16),
            "window_index": np.array([0, 1]),
        }
        loss = model.train_on_batch(batch, return_dict=True)["loss"]
        assert np.isfinite(loss) and int(model.optimizer.iterations.numpy()) == 1
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")


def test_every_batch_carries_its_own_windows_teacher_logits_replay_included(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from sample_files import sample_data_path

    from qa_finetune.config import Config
    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.training.trainer import Trainer

    teacher = str(tiny_model_dir)
    values = tiny_run_config(tiny_model_dir, tmp_path, method="distill", teacher=teacher).to_dict()
    values["data"].update(replay_file=str(sample_data_path("validation")), replay_fraction=0.3)
    trainer = Trainer(Config.from_dict(values))
    trainer.check()
    trainer.prepare_data()
    model = load_qa_model(tiny_model_dir)
    seen = []
    for batch in trainer.epoch_dataset(1, 0, None).as_numpy_iterator():
        seen += batch["window_index"].tolist()
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
        output = model(inputs, training=False)
        real = batch["attention_mask"].astype(bool)
        for ours, theirs in (
            ("teacher_start_logits", output.start_logits),
            ("teacher_end_logits", output.end_logits),
        ):
            assert batch[ours].dtype == np.float16 and batch[ours].shape == real.shape
            np.testing.assert_allclose(
                batch[ours][real], theirs.numpy()[real], atol=3e-3, rtol=3e-3
            )
            assert (batch[ours][~real] < -1e3).all()
    # The epoch's windows are shuffled and hold replay windows (counted after the run's own).
    assert seen != sorted(seen) and max(seen) >= len(trainer.prepared.train)
    assert not (tmp_path / "tiny").exists()
