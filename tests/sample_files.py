"""The sample SQuAD files bundled in the package (``qa_finetune/sample_data/``)."""

from __future__ import annotations

from pathlib import Path

SAMPLE_DATA_DIR = Path(__file__).parents[1] / "qa_finetune" / "sample_data"


def sample_data_path(name: str = "train") -> Path:
    """Path of a bundled sample file: ``train``, ``validation`` or ``unanswerable``."""
    return SAMPLE_DATA_DIR / f"{name}.json"
