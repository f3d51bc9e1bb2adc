"""``ask --index`` on an ONNX export never starts TensorFlow: the reader runs on ONNX Runtime
and the question's vector comes from the encoder's own files through NumPy (checked in a
fresh interpreter, as a user's command runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qa_finetune.documents.markdown_text import markdown_to_text
from qa_finetune.modeling.sentence_encoder import SentenceEncoder
from qa_finetune.retrieval.building import IndexSettings, build_index

DOCUMENTS = {
    "bridge.txt": "The Ostra bridge was designed by the engineer Karl Lindqvist and opened in "
    "1912.",
    "car.md": "# Winter\n\nOur old automobile refused to start during the freezing January "
    "mornings, so the mechanic replaced its battery.",
}


@pytest.fixture(scope="module")
def onnx_and_index(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tf2onnx")
    from qa_finetune.publish.export import export_run

    root = tmp_path_factory.mktemp("onnx-index")
    export_run(tiny_model_dir, "onnx", output=root / "onnx")
    (root / "docs").mkdir()
    for name, text in DOCUMENTS.items():
        (root / "docs" / name).write_text(text + "\n", encoding="utf-8")
    build_index([root / "docs"], root / "index", IndexSettings(encoder=SentenceEncoder.load()))
    return root


@pytest.mark.parametrize("retriever", ["hybrid", "dense"])
def test_ask_index_on_an_onnx_export_never_imports_tensorflow(
    onnx_and_index: Path, retriever: str
) -> None:
    root = onnx_and_index
    args = [
        "ask", "Which vehicle would not turn on when it was very cold?",
        "--index", str(root / "index"), "--model", str(root / "onnx"),
        "--retriever", retriever, "--json",
    ]  # fmt: skip
    code = (
        "import sys\n"
        "from qa_finetune.cli.app import app\n"
        f"sys.argv = ['qa-finetune', *{args!r}]\n"
        "try:\n    app()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('TF', 'tensorflow' in sys.modules, 'transformers' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    *answer_lines, flags = result.stdout.strip().splitlines()
    answer = json.loads("\n".join(answer_lines))
    # The paraphrase shares no word with its document: the question's vector found it.
    assert Path(answer["document"]).name == "car.md"
    text = markdown_to_text((root / "docs" / "car.md").read_text(encoding="utf-8"))
    assert text[answer["start"] : answer["end"]] == answer["answer"]
    assert flags == "TF False False"
