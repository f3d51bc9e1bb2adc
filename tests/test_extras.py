"""Optional extras named in one line, and registries and shims that import nothing heavy."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_missing_extra_is_one_line_naming_every_missing_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from qa_finetune.libraries.extras import MissingExtraError, require_all

    monkeypatch.setitem(sys.modules, "fastapi", None)
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with pytest.raises(MissingExtraError) as caught:
        require_all(("fastapi", "uvicorn", "json"), "serve", "serve")
    assert str(caught.value) == (
        "serve needs fastapi, uvicorn: install the serve extra with "
        "pip install 'qa-finetune[serve]'"
    )


def test_registries_import_nothing_heavy() -> None:
    """The registries are read by --help and by ONNX answering: no TensorFlow, transformers,
    datasets or optional extra at import time."""
    code = (
        "import sys\n"
        "import qa_finetune.libraries.compat, qa_finetune.libraries.extras\n"
        "import qa_finetune.modeling.families\n"
        "import qa_finetune.modeling.formats, qa_finetune.modeling.formats.qa_config\n"
        "heavy = ('tensorflow', 'transformers', 'datasets', 'onnx', 'onnxruntime', 'tf2onnx')\n"
        "print([name for name in heavy if name in sys.modules])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
