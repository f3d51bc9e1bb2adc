"""The package stays readable: one idea per module, functions that fit a screen.

A module may be long when it holds one idea: cutting an idea at a line count only makes files
named after half of another (``*_fit``, ``*_base``, ``*_features``) and helpers moved away from
their one caller. So the limits are a generous ceiling for every module, a short reviewed list
of the modules past ``REVIEWED_ABOVE`` lines with the one idea each holds (a new one past it
must be added here, with its idea, or split by idea), and no module named as half of another.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "qa_finetune"
MAX_MODULE_LINES = 600
REVIEWED_ABOVE = 400
MAX_FUNCTION_LINES = 60
MODULES = sorted(PACKAGE.rglob("*.py"))
# Modules past REVIEWED_ABOVE lines, each with the one idea it holds.
REVIEWED = {
    "qa_finetune/calibration/confidence.py": (
        "the first answer's confidence: its features, the saved calibration (temperature or "
        "logistic, with its range and parts), and its fit on held-out answers with the refusal "
        "of a fit that learned nothing"
    ),
}
# Suffixes that name a module after a part of another (its fit, its base, its features).
HALF_SUFFIXES = ("_base", "_fit", "_features")


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_module_fits(path: Path) -> None:
    lines = _lines(path)
    assert lines <= MAX_MODULE_LINES, f"{_name(path)} has {lines} lines: split it by idea"
    if lines > REVIEWED_ABOVE:
        assert _name(path) in REVIEWED, (
            f"{_name(path)} has {lines} lines: add it to REVIEWED with the one idea it holds, "
            "or split it where it holds two"
        )


def test_the_reviewed_list_names_only_long_modules() -> None:
    stale = [name for name in REVIEWED if _lines(PACKAGE.parent / name) <= REVIEWED_ABOVE]
    assert not stale, f"no longer past {REVIEWED_ABOVE} lines, drop from REVIEWED: {stale}"


def test_no_module_is_named_as_half_of_another() -> None:
    halves = [
        _name(path)
        for path in MODULES
        if path.stem.endswith(HALF_SUFFIXES)
        and (path.parent / f"{path.stem.rsplit('_', 1)[0]}.py").exists()
    ]
    assert not halves, f"keep an idea in one module: {halves}"


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
    # A wrong root would make the tests above pass on nothing.
    assert len(MODULES) > 50
    assert PACKAGE / "config" / "__init__.py" in MODULES
