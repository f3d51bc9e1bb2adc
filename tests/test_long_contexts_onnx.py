"""An ONNX export reads a long context as the run it came from does: the same passages, the same
answers at the same offsets of the whole text."""

from __future__ import annotations

from pathlib import Path

import pytest

from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.retrieval.long_contexts import DEFAULT_THRESHOLD_WORDS, LongContexts
from tests.test_long_contexts import QUESTION, document


@pytest.fixture(scope="module")
def onnx_export(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tf2onnx")
    from qa_finetune.publish.export import export_run

    return export_run(tiny_model_dir, "onnx", output=tmp_path_factory.mktemp("long") / "onnx")


def _answers_and_windows(answerer: QuestionAnswerer, text: str) -> tuple[list[dict], list[int]]:
    windows: list[int] = []
    answerer.progress = lambda total: windows.append(total) or None
    return answerer.answer(QUESTION, text, top_k=3), windows


def test_an_onnx_export_reads_a_long_context_as_its_run_does(
    tiny_model_dir: Path, onnx_export: Path
) -> None:
    text = document(count=45)
    assert len(text.split()) > DEFAULT_THRESHOLD_WORDS  # read as its best passages
    on_tf = QuestionAnswerer.load(str(tiny_model_dir), backend="tf", warn_untrained_head=False)
    on_onnx = QuestionAnswerer.load(str(onnx_export), backend="onnx", warn_untrained_head=False)
    assert on_onnx.backend == "onnx"
    tf_answers, tf_windows = _answers_and_windows(on_tf, text)
    onnx_answers, onnx_windows = _answers_and_windows(on_onnx, text)
    assert onnx_windows == tf_windows
    assert [(a["answer"], a["start"], a["end"]) for a in onnx_answers] == [
        (a["answer"], a["start"], a["end"]) for a in tf_answers
    ]
    for a, b in zip(onnx_answers, tf_answers, strict=True):
        assert text[a["start"] : a["end"]] == a["answer"]
        assert a["score"] == pytest.approx(b["score"], abs=1e-3)
    on_onnx.long_contexts = LongContexts(read_all=True)
    _, every_window = _answers_and_windows(on_onnx, text)
    assert onnx_windows[0] < every_window[0]
