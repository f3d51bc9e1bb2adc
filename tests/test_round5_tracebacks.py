"""Round five of bad inputs, tracebacks made one line: ``prepare`` without training data
(``KeyError: 'windows_per_example'`` after the features were written), ``index
--max-file-mb inf`` (``OverflowError``) and BM25 files damaged in four ways (a ``TypeError``,
a ``RecursionError``, a shape error at the first question, a bare ``Aborted.``). Each is one
exact line and exit 1, and the tree is as it was."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from round4_files import squad_file, tree
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.retrieval.building import build_index
from qa_finetune.retrieval.index_files import SCORES

CONFIG = Path(__file__).parents[1] / "configs" / "default.yaml"
NO_TRAINING_DATA = (
    "error: no training data given (only --validation-file): pass --train-file FILE or "
    "--dataset NAME, or a --config file that sets data.train_file or data.dataset"
)


def run(args: list[object]) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stderr.splitlines(), result.stdout


# Item 4: validation data alone is refused before a feature is built or a folder made.
@pytest.mark.parametrize("how", ["config with an empty train_file", "validation file alone"])
def test_prepare_without_training_data_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.chdir(tmp_path)  # the default --output-dir, outputs/, would be made here
    validation = squad_file(tmp_path / "validation.json")
    if how == "validation file alone":
        args: list[object] = ["prepare", "--validation-file", validation]
    else:
        args = ["prepare", "--config", CONFIG, "--set", "data.train_file="]
        args += ["--set", f"data.validation_file={validation}"]
    before = tree(tmp_path)
    assert run(args) == (1, [NO_TRAINING_DATA], "")
    assert tree(tmp_path) == before


# Item 5: a cap of infinity (or one no read can take) is one line.
@pytest.mark.parametrize("value", ["inf", "1e300"])
def test_index_max_file_mb_past_any_file_is_one_line(tmp_path: Path, value: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Alma Stroud designed the bridge.", "utf-8")
    before = tree(tmp_path)
    args = ["index", tmp_path / "docs", "--output", tmp_path / "o", "--max-file-mb", value]
    code, errors, out = run([*args, "--encoder", "none"])
    assert (code, out) == (1, "")
    assert errors == [
        f"error: --max-file-mb must be a number of megabytes up to 1,000,000, got "
        f"{float(value)}: give the size above which files are skipped, e.g. 50"
    ]
    assert tree(tmp_path) == before


def _cut(bm25: Path) -> None:
    data = bm25 / "data.csc.index.npy"
    data.write_bytes(data.read_bytes()[:-8])


def _nested(bm25: Path) -> None:
    (bm25 / "vocab.index.json").write_text("[" * 100_000 + "]" * 100_000, "utf-8")


def _other_array(bm25: Path) -> None:
    counted = len(np.load(bm25 / "data.csc.index.npy"))
    np.save(bm25 / "data.csc.index.npy", np.zeros(counted + 2, dtype=np.float32))


def _list_settings(bm25: Path) -> None:
    (bm25 / "params.index.json").write_text("[]", "utf-8")


def _settings_with(**changed: object) -> Callable[[Path], None]:
    def damage(bm25: Path) -> None:
        settings = json.loads((bm25 / "params.index.json").read_text("utf-8"))
        (bm25 / "params.index.json").write_text(json.dumps({**settings, **changed}), "utf-8")

    return damage


def _empty_pointers(bm25: Path) -> None:
    (bm25 / "indptr.csc.index.npy").write_bytes(b"")


def _term_past_the_matrix(bm25: Path) -> None:
    vocabulary = json.loads((bm25 / "vocab.index.json").read_text("utf-8"))
    vocabulary["bridg"] = 10_000
    (bm25 / "vocab.index.json").write_text(json.dumps(vocabulary), "utf-8")


# Item 6: the line a cut file gets (first), for each damage the audit found, and for settings
# and a vocabulary that would fail only at the first question.
DAMAGED = {
    "a file cut short": (_cut, "data.csc.index.npy is cut short or not an array"),
    "settings that are a list": (_list_settings, "params.index.json is not an object of settings"),
    "a vocabulary nested 100,000 deep": (_nested, "vocab.index.json nests too deep"),
    "another array": (
        _other_array,
        "data.csc.index.npy holds 7 values where indptr.csc.index.npy counts 5",
    ),
    "empty pointers": (_empty_pointers, "indptr.csc.index.npy is cut short or not an array"),
    "a type numpy does not know": (
        _settings_with(dtype="nope"),
        "params.index.json: its dtype is not one bm25s saves",
    ),
    "a setting bm25s does not save": (
        _settings_with(colour="red"),
        "params.index.json holds settings bm25s does not save (colour)",
    ),
    "a backend not installed": (
        _settings_with(backend="numba"),
        "params.index.json: its backend is not one bm25s saves",
    ),
    "a term past the matrix": (
        _term_past_the_matrix,
        "vocab.index.json holds a term number outside the matrix",
    ),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs = tmp_path_factory.mktemp("docs")
    (docs / "a.txt").write_text("Alma Stroud designed the bridge in 1931.", "utf-8")
    index = docs.parent / f"{docs.name}-index"
    build_index([docs], index)  # BM25 alone: no encoder
    # Five terms (alma, stroud, design, bridg, 1931): "another array" says 7 for 5.
    assert len(np.load(index / SCORES / "data.csc.index.npy")) == 5
    return index


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_score_file_is_the_rebuild_line(built: Path, tmp_path: Path, case: str) -> None:
    damage, detail = DAMAGED[case]
    index = tmp_path / "index"
    shutil.copytree(built, index)
    damage(index / SCORES)
    before = tree(tmp_path)
    args = ["ask", "Who designed the bridge?", "--index", index, "--model", tmp_path / "none"]
    assert run(args) == (
        1,
        [
            f"error: {index / SCORES} is not a readable BM25 index ({detail}): rebuild it with "
            "qa-finetune index"
        ],
        "",
    )
    assert tree(tmp_path) == before


# Item 7: a record with a context past data.max_context_chars is refused before any window.
def test_prepare_refuses_a_context_past_its_cap_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    train = tmp_path / "train.json"
    context = "Alma Stroud designed the bridge. " * 40  # 1,320 characters
    train.write_text(
        json.dumps(
            [
                {
                    "id": "long-1",
                    "title": "t",
                    "context": context,
                    "question": "Who designed the bridge?",
                    "answers": {"text": ["Alma Stroud"], "answer_start": [0]},
                }
            ]
        ),
        encoding="utf-8",
    )
    before = tree(tmp_path)
    args = ["prepare", "--config", CONFIG, "--set", f"data.train_file={train}"]
    args += ["--set", "data.validation_file=", "--set", "data.max_context_chars=1000"]
    assert run(args) == (
        1,
        [
            f"error: {train}: record 'long-1' has a context of 1,320 characters, over "
            "data.max_context_chars (1,000): split it into paragraphs (one record each), raise "
            "data.max_context_chars, or index whole documents with `qa-finetune index DOCS "
            "--output INDEX` and ask them with --index"
        ],
        "",
    )
    assert tree(tmp_path) == before
