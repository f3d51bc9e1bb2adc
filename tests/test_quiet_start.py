"""A command's stderr holds the command's own lines: TensorFlow's native start-up messages
(absl, oneDNN, the CUDA probe) are hidden wherever TensorFlow is first imported, and shown
with ``qa-finetune --verbose``. Each command runs in a fresh process, as a user's does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.modeling.sentence_encoder import SentenceEncoder
from qa_finetune.retrieval.building import IndexSettings, build_index

# What TensorFlow's C++ side prints: absl's preamble, glog-style lines (I0000 ..., E0000 ...),
# oneDNN's and the CUDA probe's notices.
NATIVE_LINE = re.compile(r"absl|oneDNN|cuda|cuInit|^[IWEF]\d{4} |tensorflow", re.I | re.M)
CONTEXT = "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931."


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("QA_FINETUNE_TF_LOGS", None)
    return subprocess.run(
        [sys.executable, "-m", "qa_finetune", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.fixture(scope="module")
def hybrid_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("quiet")
    (root / "docs").mkdir()
    (root / "docs" / "bridge.txt").write_text(CONTEXT + "\n", encoding="utf-8")
    build_index([root / "docs"], root / "index", IndexSettings(encoder=SentenceEncoder.load()))
    return root / "index"


def test_a_plain_ask_shows_no_tensorflow_line(tiny_model_dir: Path) -> None:
    result = run_cli(
        "ask", "Who designed it?", "--context", CONTEXT, "--model", str(tiny_model_dir)
    )
    assert result.returncode == 0, result.stderr
    assert NATIVE_LINE.findall(result.stderr) == [], result.stderr
    assert result.stdout.strip() != ""


def test_ask_index_with_its_encoder_shows_no_tensorflow_line(
    tiny_model_dir: Path, hybrid_index: Path
) -> None:
    # The question encoder (hybrid search, the default) is where TensorFlow used to start
    # loudly: outside the reader's quiet import.
    result = run_cli("ask", "Who designed the bridge?", "--index", str(hybrid_index),
                     "--model", str(tiny_model_dir))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert NATIVE_LINE.findall(result.stderr) == [], result.stderr


def test_verbose_is_offered_before_any_command() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0 and "--verbose" in result.stdout
