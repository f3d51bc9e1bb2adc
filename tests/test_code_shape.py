"""The package stays readable: modules that fit a few screens, functions that fit one.

Limits, not style preferences: a module past 300 lines or a function past 60 has always been
a sign that it holds two jobs (see docs/ARCHITECTURE.md, "Packages by layer").
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "qa_finetune"
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60
MODULES = sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_module_fits(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{_name(path)} has {lines} lines"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_functions_fit(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{_name(path)}: {', '.join(long)}"


def test_every_module_is_checked() -> None:
    # A wrong root would make the two tests above pass on nothing.
    assert len(MODULES) > 50
    assert PACKAGE / "config" / "__init__.py" in MODULES
