"""Batches run in several forward passes at once give the very logits of one pass."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qa_finetune.errors import InferenceError
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.modeling import cpu_threads
from qa_finetune.modeling.predict import predict_features

CONTEXT = (
    "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931. It crosses the bay "
    "in three arches of grey granite, and its lamps were lit for the first time in 1932."
)


def windows(answerer: QuestionAnswerer) -> dict[str, list[list[int]]]:
    """Windows of several lengths (contexts cut short, a long one in many windows)."""
    questions = ["Who designed the bridge?", "When did it open?", "What is it made of?"] * 3
    contexts = [CONTEXT[: 40 + 25 * i] for i in range(8)] + [CONTEXT * 4]
    encoding = answerer.windows(questions, contexts).encoding
    return {name: encoding[name] for name in ("input_ids", "attention_mask", "token_type_ids")}


@pytest.fixture(scope="module")
def answerer(tiny_model_dir: Path) -> QuestionAnswerer:
    return QuestionAnswerer.load(str(tiny_model_dir), max_length=48, stride=16, batch_size=3)


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("passes", [2, 3])
def test_passes_give_the_logits_of_one_pass_byte_for_byte(
    answerer: QuestionAnswerer, compile: bool, passes: int
) -> None:
    columns = windows(answerer)
    assert len({len(row) for row in columns["input_ids"]}) > 3  # batches of several lengths
    one = predict_features(answerer.model, columns, 3, compile=compile, passes=1)
    many = predict_features(answerer.model, columns, 3, compile=compile, passes=passes)
    for alone, together in zip(one, many, strict=True):
        assert alone.dtype == together.dtype and alone.shape == together.shape
        assert alone.tobytes() == together.tobytes()


class Recorder:
    """A predictor whose logits are its input ids; the first two calls wait for each other,
    so they pass only when two passes are in flight at once."""

    def __init__(self, concurrent: bool, fail_on: int | None = None) -> None:
        self.concurrent_calls = concurrent
        self.fail_on = fail_on
        self.threads: list[str] = []
        self.meet = threading.Barrier(2, timeout=10)
        self.lock = threading.Lock()

    def predict_batch(self, batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            self.threads.append(threading.current_thread().name)
            calls = len(self.threads)
        if self.concurrent_calls and calls <= 2:
            self.meet.wait()
        if calls == self.fail_on:
            raise RuntimeError("out of memory")
        ids = batch["input_ids"].astype(np.float32)
        return ids, -ids


def id_columns(count: int) -> dict[str, list[list[int]]]:
    rows = [list(range(1, 2 + i % 7)) for i in range(count)]
    return {"input_ids": rows, "attention_mask": [[1] * len(row) for row in rows]}


def test_batches_are_shared_among_the_passes_and_each_lands_in_its_rows() -> None:
    columns = id_columns(20)
    model = Recorder(concurrent=True)
    start, end = predict_features(model, columns, 2, pad_token_id=0, passes=2)
    assert len(model.threads) == 10 and set(model.threads) == {"qa-pass-0", "qa-pass-1"}
    for row, ids in enumerate(columns["input_ids"]):
        assert start[row, : len(ids)].tolist() == ids
        assert end[row, : len(ids)].tolist() == [-i for i in ids]


def test_a_predictor_that_does_not_say_it_may_overlap_runs_one_pass() -> None:
    model = Recorder(concurrent=False)
    predict_features(model, id_columns(9), 2, pad_token_id=0, passes=4)
    assert set(model.threads) == {threading.current_thread().name}


def test_without_passes_given_the_share_of_the_cores_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = Recorder(concurrent=True)
    monkeypatch.setattr(cpu_threads, "_passes", 2)
    predict_features(model, id_columns(6), 2, pad_token_id=0)
    assert set(model.threads) == {"qa-pass-0", "qa-pass-1"}


def test_a_failing_pass_stops_the_others_and_is_raised() -> None:
    model = Recorder(concurrent=True, fail_on=3)
    with pytest.raises(RuntimeError, match="out of memory"):
        predict_features(model, id_columns(40), 2, pad_token_id=0, passes=2)
    # The pass still running finishes its batch; no new batch starts.
    assert len(model.threads) <= 4


def test_passes_below_one_are_refused() -> None:
    with pytest.raises(InferenceError, match="passes must be at least 1, got 0"):
        predict_features(Recorder(concurrent=True), id_columns(2), 1, passes=0)


def test_onnx_sessions_run_passes_at_once_with_the_same_logits(
    answerer: QuestionAnswerer, tiny_model_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("tf2onnx")
    from qa_finetune.modeling.formats.onnx import OnnxPredictor
    from qa_finetune.publish.export import export_run

    exported = export_run(tiny_model_dir, "onnx", output=tmp_path / "onnx")
    predictor: Any = OnnxPredictor.load(exported / "model.onnx", threads=1)
    assert predictor.concurrent_calls
    columns = windows(answerer)
    one = predict_features(predictor, columns, 3, pad_token_id=0, passes=1)
    two = predict_features(predictor, columns, 3, pad_token_id=0, passes=2)
    for alone, together in zip(one, two, strict=True):
        assert alone.tobytes() == together.tobytes()
