"""``train.method=shared_norm``: a question's windows trained with one softmax over all of
them, checked against a loss computed by hand; its epoch order keeps a question together."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from qa_finetune.training.methods.shared_norm import (
    grouped_order,
    holds_answer,
    question_of,
    shared_norm_loss,
)

# Two windows of one question, four positions each (CLS first). Window A holds the answer
# (start at 2, end at 3); window B does not (its labels on CLS) and its last position is
# padding, whose logit of 100 must count for nothing.
START = [[0.0, 1.0, 3.0, 0.0], [0.0, 2.0, 0.0, 100.0]]
END = [[0.0, 0.0, 1.0, 2.0], [1.0, 0.0, 0.0, 100.0]]
MASK = [[1, 1, 1, 1], [1, 1, 1, 0]]


def loss(start, end, labels, mask, questions, holds) -> list[float]:
    values = shared_norm_loss(
        (tf.constant(start), tf.constant(end)),
        (tf.constant(labels[0]), tf.constant(labels[1])),
        tf.constant(mask),
        tf.constant(questions),
        tf.constant(holds),
    )
    return values.numpy().tolist()


def test_two_windows_share_one_softmax_as_by_hand() -> None:
    # Start: every real position of both windows in one softmax, the gold one is A's 2.
    start_all = math.log(
        math.exp(0)
        + math.exp(1)
        + math.exp(3)
        + math.exp(0)  # window A
        + math.exp(0)
        + math.exp(2)
        + math.exp(0)  # window B, padding left out
    )
    start_loss = start_all - 3.0
    end_all = math.log(
        math.exp(0)
        + math.exp(0)
        + math.exp(1)
        + math.exp(2)
        + math.exp(1)
        + math.exp(0)
        + math.exp(0)
    )
    end_loss = end_all - 2.0
    question = (start_loss + end_loss) / 2
    per_window = loss(START, END, ([2, 0], [3, 0]), MASK, [7, 7], [True, False])
    # The question's loss shared equally between its two windows.
    assert per_window == pytest.approx([question / 2, question / 2], rel=1e-6)
    assert sum(per_window) == pytest.approx(0.67746, abs=1e-5)  # log(34.193) - 3, log(16.826) - 2


def test_separate_questions_and_a_question_without_its_answer_keep_their_own() -> None:
    per_window = loss(START, END, ([2, 0], [3, 0]), MASK, [1, 2], [True, False])
    # A alone: the standard loss of its own window.
    a_start = math.log(math.exp(0) + math.exp(1) + math.exp(3) + math.exp(0)) - 3.0
    a_end = math.log(math.exp(0) + math.exp(0) + math.exp(1) + math.exp(2)) - 2.0
    # B alone and without the answer: its standard loss with the labels on CLS.
    b_start = math.log(math.exp(0) + math.exp(2) + math.exp(0)) - 0.0
    b_end = math.log(math.exp(1) + math.exp(0) + math.exp(0)) - 1.0
    expected = [(a_start + a_end) / 2, (b_start + b_end) / 2]
    assert per_window == pytest.approx(expected, rel=1e-6)


def test_two_windows_holding_the_answer_both_count_as_gold() -> None:
    start = [[0.0, 1.0], [0.0, 2.0]]
    end = [[0.0, 1.0], [0.0, 2.0]]
    per_window = loss(start, end, ([1, 1], [1, 1]), [[1, 1], [1, 1]], [0, 0], [True, True])
    every = math.log(1 + math.e + 1 + math.exp(2))
    gold = math.log(math.e + math.exp(2))
    assert per_window == pytest.approx([(every - gold) / 2] * 2, rel=1e-6)


def test_a_window_holds_its_answer_unless_both_labels_are_on_cls() -> None:
    ids = tf.constant([[101, 5, 6], [101, 7, 8], [9, 101, 8]])  # the last: CLS at 1
    found = holds_answer(ids, (tf.constant([1, 0, 1]), tf.constant([2, 0, 1])), 101)
    assert found.numpy().tolist() == [True, False, False]


def test_the_epoch_order_keeps_a_question_s_windows_side_by_side() -> None:
    questions = np.array([0, 0, 0, 1, 1, 2])
    order = np.array([4, 0, 5, 2, 3, 1])
    assert grouped_order(order, questions).tolist() == [4, 3, 0, 2, 1, 5]


def test_a_question_s_negative_shares_its_softmax() -> None:
    assert question_of("q7#negative") == "q7" and question_of("q7") == "q7"
    assert question_of("q7#negative#negative") == "q7#negative"  # only the one suffix made


def test_prepare_numbers_a_negative_s_windows_as_its_question_s() -> None:
    from datasets import Dataset

    from qa_finetune.training.methods.shared_norm import QUESTION_INDEX, SharedNorm
    from qa_finetune.training.prepare import PreparedData

    ids = ["a", "a", "b", "a#negative", "b#negative", "c"]
    train = Dataset.from_dict({"example_id": ids})
    prepared = PreparedData(train, None, None, {}, Path("."), "", False, Path("."), None)
    method = SharedNorm()
    with_numbers = method.prepare(None, prepared)  # type: ignore[arg-type]
    assert with_numbers.train[QUESTION_INDEX] == [0, 0, 1, 0, 1, 2]
    assert method.questions.tolist() == [0, 0, 1, 0, 1, 2]


def test_a_shared_norm_run_trains_end_to_end(tiny_model_dir: Path, tmp_path: Path) -> None:
    from tiny_runs import tiny_run_config

    from qa_finetune.training.trainer import train

    config = tiny_run_config(tiny_model_dir, tmp_path, method="shared_norm", epochs=1)
    # Short windows, so that questions have several and the shared softmax has work to do.
    config = dataclasses.replace(
        config, preprocess=dataclasses.replace(config.preprocess, max_length=64, stride=16)
    )
    run_dir = train(config)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert math.isfinite(metrics["train_loss"]) and metrics["train_loss"] > 0
    assert metrics["method"] == "shared_norm"
    assert (run_dir / "model" / "model.safetensors").is_file()
