"""One line describing the machine a benchmark ran on."""

from __future__ import annotations

import os
import platform
from datetime import date

# The same name the batch-size profiles are keyed by.
from qa_finetune.modeling.profile_cache import cpu_model

__all__ = ["cpu_model", "machine_line"]


def machine_line() -> str:
    """``machine: N cores, CPU model, Python x.y, date``."""
    return (
        f"machine: {os.cpu_count()} cores, {cpu_model()}, Python {platform.python_version()}, "
        f"{date.today().isoformat()}"
    )
