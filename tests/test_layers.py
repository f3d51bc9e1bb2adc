"""The package's layers, read from the source: every import points down, and none loops.

From the bottom: errors/config (and the other plain modules beside them) -> data | documents |
features -> decoding | retrieval -> calibration -> runs -> modeling -> training | inference |
evaluation -> crossval | publish | serving -> labeling -> cli.
Modules of one layer's different packages never import each other (training, inference and
evaluation share code through the layers below). Imports inside functions count: a lazy
import is still a dependency, it only moves the cost.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "qa_finetune"

# Each top-level module or package of qa_finetune and its layer (higher imports lower).
LAYERS = {
    "errors": 0,
    "config": 0,
    "files": 0,
    "libraries": 0,
    "metrics": 0,
    "tables": 0,
    # The package root holds the version and names the public API lazily (importlib, not an
    # import statement): Python imports it before any of its modules anyway.
    "": 0,
    # The pure parts: examples in, model inputs out, logits decoded into answers.
    "data": 1,
    # Document files read as text (text, Markdown, HTML, PDF, SQuAD contexts).
    "documents": 1,
    "features": 1,
    "decoding": 2,
    # The search index: passages of documents and their BM25 scores.
    "retrieval": 2,
    # Everything fitted on held-out answers: the no-answer rule, the confidence calibrators,
    # their features, fits and metrics (pure: a run's files of them are kept by runs).
    "calibration": 3,
    "runs": 4,
    "modeling": 5,
    "training": 6,
    "inference": 6,
    "evaluation": 6,
    # Cross-validation trains (training) and scores (evaluation) each fold.
    "crossval": 7,
    "publish": 7,
    "serving": 7,
    # The labeling page reuses the answering app's body guard and proposes a model's answers.
    "labeling": 8,
    "cli": 9,
    # `python -m qa_finetune` runs the CLI.
    "__main__": 10,
}
# Plain modules of the bottom layer may import each other (cycles are checked below).
BOTTOM = 0


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(name: str, path: Path) -> set[str]:
    """The package's modules (or packages) that ``name`` imports, anywhere in its source."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "qa_finetune")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing module's package
                here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] != "qa_finetune":
                continue
            # `from pkg import module` depends on the module, `from module import name` on it.
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in MODULES else base)
    found.discard(name)
    return found


IMPORTS = {name: _imported(name, path) for name, path in MODULES.items()}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_part_of_the_package_has_a_layer() -> None:
    unknown = sorted({_top(m) for m in MODULES} - set(LAYERS))
    assert not unknown, f"add {unknown} to LAYERS in this test (and to docs/ARCHITECTURE.md)"


def _wrong_way(source: str, target: str) -> bool:
    if _top(source) == _top(target):
        return False  # inside one package: only cycles are wrong
    low, high = LAYERS.get(_top(target), 99), LAYERS.get(_top(source), 99)
    return low > high or (low == high and high != BOTTOM)


def test_imports_point_down_only() -> None:
    wrong = [
        f"{source} imports {target}"
        for source, targets in IMPORTS.items()
        for target in sorted(targets)
        if _wrong_way(source, target)
    ]
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(wrong))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_import_cycles() -> None:
    assert _cycles(IMPORTS) == []


def test_the_checks_catch_what_they_look_for() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _wrong_way("qa_finetune.runs.directory", "qa_finetune.modeling.saving")
    assert _wrong_way("qa_finetune.training.train", "qa_finetune.inference.answerer")
    assert _wrong_way("qa_finetune.serving.app", "qa_finetune.publish.export")
    assert _wrong_way("qa_finetune.config.values", "qa_finetune.data.loading")
    assert _wrong_way("qa_finetune.features.windows", "qa_finetune.data.loading")
    assert not _wrong_way("qa_finetune.decoding.spans", "qa_finetune.features.arrays")
    assert not _wrong_way("qa_finetune.config", "qa_finetune.config.values")
    assert not _wrong_way("qa_finetune.cli.ask", "qa_finetune.inference.answerer")
    assert not _wrong_way("qa_finetune.modeling.for_answering", "qa_finetune.runs.lookup")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from qa_finetune.files import write_json\n", {"qa_finetune.files"}),
        ("from qa_finetune.runs import lookup\n", {"qa_finetune.runs.lookup"}),
        ("def f():\n    import qa_finetune.decoding.spans\n", {"qa_finetune.decoding.spans"}),
        ("from ..files import read_text\n", {"qa_finetune.files"}),
    ],
)
def test_imports_are_read_everywhere_in_a_module(
    source: str, expected: set[str], tmp_path: Path
) -> None:
    path = tmp_path / "module.py"
    path.write_text(source, encoding="utf-8")
    assert _imported("qa_finetune.runs.module", path) == expected
