"""Round four of bad inputs, data files and the commands that read them (``split``,
``prepare``, ``train``, ``crossval``, ``evaluate --predictions``): each gets one exact line
and its exit code; a refusal leaves the tree byte for byte as it was.

Every case fails (or finishes) before a model loads, so the file runs in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from round4_files import squad_file, tree
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.data.records import offset_problem

REPO = Path(__file__).resolve().parents[1]
# Under Python's 4,300-digit guard, over what a float holds (OverflowError before the fix).
DIGITS_4000 = "9" * 4000


def run(args: list[str]) -> tuple[int, list[str], str]:
    """Exit code, stderr lines and stdout of the CLI called with ``args``."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stderr.splitlines(), result.stdout


def with_start(path: Path, start: str) -> Path:
    """``path``'s SQuAD file with its first ``answer_start`` written as ``start``."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"answer_start": 0', f'"answer_start": {start}', 1), "utf-8")
    return path


# Item 1: a 4,000-digit answer_start is "not a character offset", as 1e400 is.
def test_a_4000_digit_offset_is_not_a_character_offset() -> None:
    answers = {"text": ["Alma"], "answer_start": [int(DIGITS_4000)]}
    assert offset_problem(answers, "Alma Stroud") == (
        "answer_start (an integer of 4000 digits) is not a character offset into the context"
    )
    assert offset_problem({"text": ["Alma"], "answer_start": [float("inf")]}, "Alma") == (
        "answer_start inf is not a character offset into the context"
    )
    assert offset_problem({"text": ["Alma"], "answer_start": [0]}, "Alma Stroud") is None


@pytest.mark.parametrize("start", [DIGITS_4000, "1e400"])
def test_split_drops_a_huge_offset_with_a_note(tmp_path: Path, start: str) -> None:
    data = with_start(squad_file(tmp_path / "d.json"), start)
    code, errors, _ = run(["split", data, "--output-dir", tmp_path / "out"])
    assert code == 0
    shown = "(an integer of 4000 digits)" if start == DIGITS_4000 else "inf"
    assert errors[0] == (
        "note: 1 of 6 examples dropped (first: q0-0 (article 1 ('t0') of d.json): "
        f"answer_start {shown} is not a character offset into the context)"
    )
    written = json.loads((tmp_path / "out" / "train.json").read_bytes())
    written_ids = [q["id"] for a in written["data"] for p in a["paragraphs"] for q in p["qas"]]
    assert "q0-0" not in written_ids


def test_evaluate_predictions_leaves_out_a_huge_offset(tmp_path: Path) -> None:
    data = with_start(squad_file(tmp_path / "d.json"), DIGITS_4000)
    predictions = {f"q{n}-0": "Alma Stroud" for n in range(6)}
    (tmp_path / "p.json").write_text(json.dumps(predictions), encoding="utf-8")
    args = ["evaluate", "--predictions", tmp_path / "p.json", "--data", data]
    code, _, out = run([*args, "--report-dir", tmp_path / "report"])
    assert code == 0
    assert (
        "Left out 1 unusable questions: 1 answer_start (an integer of 4000 digits) is not a "
        "character offset into the context"
    ) in out.splitlines()
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_bytes())
    assert metrics["exact_match"] == 100.0


# Item 2: one seed check for every seed (train.seed's own words).
@pytest.mark.parametrize(
    ("command", "seed"),
    [("split", "-1"), ("split", "4294967296"), ("crossval", "-1"), ("crossval", "4294967296")],
)
def test_every_seed_is_checked_alike(tmp_path: Path, command: str, seed: str) -> None:
    data = squad_file(tmp_path / "data" / "d.json", count=12)
    before = tree(tmp_path)
    if command == "split":
        args = ["split", data, "--output-dir", tmp_path / "out", "--seed", seed]
    else:
        args = ["crossval", "--folds", "2", "--train-file", data, "--seed", seed]
        args += ["--output-dir", tmp_path / "runs"]
    code, errors, out = run(args)
    assert code == 1
    assert errors == [f"error: --seed must be in [0, 4294967295], got {seed}"]
    assert out == ""
    assert tree(tmp_path) == before


# Item 3: a training file given as '' beside the config's validation file.
def test_train_with_an_empty_train_file_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the config's data paths are relative to the checkout
    args = ["train", "--config", "configs/default.yaml", "--train-file", ""]
    code, errors, _ = run([*args, "--output-dir", tmp_path / "runs"])
    assert code == 1
    assert errors == [
        "error: no training data given (only --validation-file): pass --train-file FILE or "
        "--dataset NAME, or a --config file that sets data.train_file or data.dataset"
    ]
    assert list(tmp_path.iterdir()) == []


# Item 6: titles merged into one document by a shared context are said to be.
def test_split_says_titles_sharing_a_context_are_one_document(tmp_path: Path) -> None:
    data = squad_file(tmp_path / "data" / "d.json", count=10, shared_context=True, questions=4)
    before = tree(tmp_path)
    code, errors, _ = run(["split", data, "--output-dir", tmp_path / "out"])
    assert code == 1
    assert errors[-1] == (
        "error: 5 folds need at least 5 documents, but the data has 1 (grouped by title; its "
        "10 titles share contexts, and titles sharing a context are one document): add "
        "documents"
    )
    assert tree(tmp_path) == before


# Item 7: no data (or data that fails to load): nothing on disk, not even features/.
@pytest.mark.parametrize("command", ["prepare", "train"])
def test_no_data_creates_no_output_dir(tmp_path: Path, command: str) -> None:
    code, errors, _ = run([command, "--output-dir", tmp_path / "new"])
    assert code == 1
    assert errors == [
        "error: no data given: pass --train-file FILE or --dataset NAME, or a --config file "
        "that sets data.train_file or data.dataset"
    ]
    assert list(tmp_path.iterdir()) == []


def test_prepare_of_data_that_fails_to_load_leaves_no_folder(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "Q", "context": "C", "question": "R"}\n', encoding="utf-8")
    before = tree(tmp_path)
    code, errors, _ = run(["prepare", "--train-file", data, "--output-dir", tmp_path / "a/b"])
    assert code == 1
    assert errors == [
        f"error: {data}: key 'question' is given twice in one object (line 1): give each key once"
    ]
    assert tree(tmp_path) == before


# Item 8: split into the data file's own folder.
@pytest.mark.parametrize("relative", [False, True])
def test_split_refuses_the_data_files_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool
) -> None:
    data = squad_file(tmp_path / "val.json")
    before = tree(tmp_path)
    if relative:
        monkeypatch.chdir(tmp_path)
    shown_data, shown_dir = ("val.json", ".") if relative else (data, tmp_path)
    code, errors, _ = run(["split", shown_data, "--output-dir", shown_dir])
    assert code == 1
    assert errors == [
        f"error: --output-dir {shown_dir} is the folder of the data file {shown_data}: choose "
        "another folder (the split never writes beside the data it splits)"
    ]
    assert tree(tmp_path) == before


# Item 20: a JSON key given twice is refused, as a YAML one is.
DUPLICATES = {
    "top-level": ('{"data": [], "version": "1.1", "data": []}', "data"),
    "nested": ('{"data": [{"title": "a", "title": "b", "paragraphs": []}]}', "title"),
    "list-of-examples": ('[{"question": "Q", "context": "C", "context": "D"}]', "context"),
}


@pytest.mark.parametrize("case", list(DUPLICATES))
@pytest.mark.parametrize("command", ["split", "prepare"])
def test_a_json_key_given_twice_is_refused(tmp_path: Path, case: str, command: str) -> None:
    text, key = DUPLICATES[case]
    data = tmp_path / "d.json"
    data.write_text(text[:1] + "\n" + text[1:], encoding="utf-8")  # two lines: no line named
    before = tree(tmp_path)
    if command == "split":
        args = ["split", data, "--output-dir", tmp_path / "out"]
    else:
        args = ["prepare", "--train-file", data, "--output-dir", tmp_path / "out"]
    code, errors, out = run(args)
    assert code == 1
    assert errors == [
        f"error: {data}: key '{key}' is given twice in one object: give each key once"
    ]
    assert out == ""
    assert tree(tmp_path) == before
