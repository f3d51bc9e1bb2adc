"""Optional dependency groups: import a module of an extra, or fail naming the extra.

The bottom layer (no heavy imports): the ``onnx`` and ``serve`` extras stay optional because
nothing imports them at module import time; this helper imports them when a command needs
them, and a missing one is a one-line error with the ``pip install`` that fixes it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType

from qa_finetune.errors import QAFinetuneError


class MissingExtraError(QAFinetuneError):
    """An optional dependency group is not installed."""


def install_command(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'qa-finetune[{extra}]'"


def _missing(names: Sequence[str], extra: str, purpose: str, fix: str) -> MissingExtraError:
    tops = ", ".join(dict.fromkeys(name.split(".")[0] for name in names))
    alternative = f", or {fix}" if fix else ""
    return MissingExtraError(
        f"{purpose} needs {tops}: install the {extra} extra with "
        f"{install_command(extra)}{alternative}"
    )


def require(module: str, extra: str, purpose: str, fix: str = "") -> ModuleType:
    """Import ``module`` of ``extra``, or fail naming the extra (and ``fix``, another way)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise _missing([module], extra, purpose, fix) from exc


def require_all(modules: Sequence[str], extra: str, purpose: str) -> None:
    """Import each of ``modules``; one error names every one that is missing."""
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise _missing(missing, extra, purpose, "")
