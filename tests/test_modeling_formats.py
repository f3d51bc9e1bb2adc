"""The export-format registry, the backend choice and the qa_config.json serialisation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qa_finetune.config import InferenceConfig
from qa_finetune.errors import QAFinetuneError
from qa_finetune.features.windows import WindowSpec


def test_every_command_reads_the_one_format_registry() -> None:
    from qa_finetune.modeling import formats

    assert formats.FORMATS == ("hf", "savedmodel", "onnx")
    assert formats.BACKENDS == ("auto", "tf", "onnx")
    assert [f.name for f in formats.SERVING] == ["savedmodel", "onnx"]
    for fmt in formats.REGISTRY.values():
        # A runtime's format says which file it runs and how to load it.
        assert (fmt.backend is None) == (fmt.load_predictor is None) == (fmt.model_file is None)
        assert fmt.serving == (fmt.card_note is not None)
    with pytest.raises(QAFinetuneError, match="unknown format 'tflite': choose one of hf, "):
        formats.get("tflite")


def test_backend_choice_follows_the_files(tmp_path: Path) -> None:
    from qa_finetune.modeling.formats import choose_backend

    assert choose_backend(tmp_path, "auto") == "tf"
    with pytest.raises(QAFinetuneError, match=r"--backend onnx: .* has no model\.onnx: export"):
        choose_backend(tmp_path, "onnx")
    (tmp_path / "model.onnx").write_bytes(b"")
    assert choose_backend(tmp_path, "auto") == "onnx"
    assert choose_backend(tmp_path, "tf") == "tf"
    with pytest.raises(QAFinetuneError, match="unknown backend 'torch': choose auto, tf or onnx"):
        choose_backend(tmp_path, "torch")
    with pytest.raises(QAFinetuneError, match="--quantized runs the int8 ONNX model: use"):
        choose_backend(tmp_path, "tf", quantized=True)
    with pytest.raises(QAFinetuneError) as caught:
        choose_backend(tmp_path, "auto", quantized=True)
    assert str(caught.value) == (
        f"--quantized: {tmp_path} has no model.int8.onnx: export one with `qa-finetune export "
        "--model RUN --format onnx --quantize int8` and pass that folder as --model, or drop "
        "--quantized"
    )
    (tmp_path / "model.int8.onnx").write_bytes(b"")
    assert choose_backend(tmp_path, "auto", quantized=True) == "onnx"


def test_inference_settings_round_trip_and_old_files_load() -> None:
    settings = InferenceConfig(n_best=5, max_answer_length=12, no_answer_threshold=1.5)
    assert InferenceConfig.from_dict(settings.to_dict()) == settings
    # An older qa_config.json: other sections' keys skipped, missing settings take defaults.
    assert InferenceConfig.from_dict({"max_length": 256, "n_best": 5}) == InferenceConfig(n_best=5)
    spec = WindowSpec(256, 64, question_first=False)
    assert spec.to_dict() == {"max_length": 256, "stride": 64, "question_first": False}


def test_qa_config_is_the_window_spec_and_decoding_settings(minilm_dir: Path) -> None:
    from qa_finetune.modeling.formats.qa_config import qa_settings
    from qa_finetune.modeling.reference import load_tokenizer

    values = qa_settings(minilm_dir, load_tokenizer(minilm_dir))
    decoding = InferenceConfig().to_dict()
    del decoding["batch_size"]
    expected = {**WindowSpec(384, 128, question_first=True).to_dict(), **decoding}
    assert {key: values[key] for key in expected} == expected
    assert "batch_size" not in values
    json.dumps(values)  # plain JSON


def test_qa_config_of_an_earlier_release_names_the_threshold_as_before(tmp_path: Path) -> None:
    from qa_finetune.modeling.for_answering import inference_settings
    from qa_finetune.modeling.formats.qa_config import read_qa_config

    (tmp_path / "qa_config.json").write_text(json.dumps({"null_score_diff_threshold": 2.5}))
    exported = read_qa_config(tmp_path)
    assert exported == {"no_answer_threshold": 2.5}
    assert inference_settings(None, exported).no_answer_threshold == 2.5


def test_onnx_sessions_use_the_allowed_cores_without_spinning() -> None:
    import os

    ort = pytest.importorskip("onnxruntime")
    from qa_finetune.modeling.formats.onnx import session_options

    options = session_options(ort)
    assert options.intra_op_num_threads == len(os.sched_getaffinity(0))
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    assert session_options(ort, threads=1).intra_op_num_threads == 1
