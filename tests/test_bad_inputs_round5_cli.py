"""Round five of bad inputs through the CLI: a key given twice, an id that is an object, an
empty batch, a read-only file under --overwrite, an option that would be ignored, and lines
that misled (an empty config, a SQuAD file given as feedback, split's summary said twice).
Each gets one exact line and its exit code, and the tree is byte for byte as it was. Every
case fails before a model loads (``--model`` names no folder)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from round4_files import squad_file, tree
from typer.testing import CliRunner

from qa_finetune.cli.app import app

LINE = '{"question": "Who?", "context": "Alma Stroud built it."}'


def run(args: list[object]) -> tuple[int, list[str], str]:
    """Exit code, stderr lines and stdout of the CLI called with ``args``."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stderr.splitlines(), result.stdout


def ask_batch(tmp_path: Path, text: str, *extra: object) -> tuple[int, list[str], Path]:
    """``ask --batch`` of a file holding ``text``; (exit code, stderr lines, the file)."""
    batch = tmp_path / "b.jsonl"
    batch.write_text(text, encoding="utf-8")
    code, errors, _ = run(["ask", "--model", tmp_path / "no-model", "--batch", batch, *extra])
    return code, errors, batch


# Item 10: a key given twice is refused in ask --batch lines and evaluate --predictions.
def test_ask_batch_refuses_a_key_given_twice(tmp_path: Path) -> None:
    text = LINE + "\n" + LINE.replace('"Who?"', '"Who?", "question": "When?"') + "\n"
    code, errors, batch = ask_batch(tmp_path, text)
    assert code == 1
    assert errors == [
        f"error: {batch}:2: key 'question' is given twice in one object: give each key once; "
        "fix the line or pass --skip-errors"
    ]


def test_evaluate_predictions_refuses_a_key_given_twice(tmp_path: Path) -> None:
    data = squad_file(tmp_path / "d.json")
    predictions = tmp_path / "p.json"
    predictions.write_text('{"q0-0": "Alma Stroud", "q0-0": "1931"}', encoding="utf-8")
    before = tree(tmp_path)
    args = ["evaluate", "--predictions", predictions, "--data", data]
    code, errors, _ = run([*args, "--report-dir", tmp_path / "report"])
    assert code == 1
    assert errors == [
        f"error: {predictions}: key 'q0-0' is given twice in one object (line 1): give each "
        "key once"
    ]
    assert tree(tmp_path) == before


# Item 14: an id that is an object was written as "{'x': 1}".
@pytest.mark.parametrize(
    ("given", "kind"), [('{"x": 1}', "an object"), ("[1]", "a list"), ("true", "a boolean")]
)
def test_ask_batch_refuses_an_id_that_is_not_text(tmp_path: Path, given: str, kind: str) -> None:
    code, errors, batch = ask_batch(tmp_path, LINE.replace("{", f'{{"id": {given}, ', 1) + "\n")
    assert code == 1
    assert errors == [
        f"error: {batch}:1: 'id' is {kind}, not a string or an integer: give each line's id as "
        "text; fix the line or pass --skip-errors"
    ]


# Item 16: an empty or blank batch file answered 0 questions and exited 0.
@pytest.mark.parametrize("text", ["", "\n  \n\n"])
def test_ask_batch_refuses_an_empty_file(tmp_path: Path, text: str) -> None:
    out = tmp_path / "out.jsonl"
    code, errors, batch = ask_batch(tmp_path, text, "--output", out)
    assert code == 1
    assert errors == [
        f"error: {batch} holds no questions (it is empty or blank): give one JSON object "
        "{question, context[, id]} per line"
    ]
    assert not out.exists()


def test_ask_refuses_a_threshold_without_allow_no_answer(tmp_path: Path) -> None:
    args = ["ask", "Who?", "--context", "Alma Stroud built it.", "--no-answer-threshold", "2"]
    code, errors, _ = run([*args, "--model", tmp_path / "no-model"])
    assert code == 1
    assert errors == [
        "error: --no-answer-threshold applies only with --allow-no-answer (without it every "
        "question gets its best span): add --allow-no-answer, or drop --no-answer-threshold"
    ]


# Item 12: a file without write bits is kept, --overwrite or not (its mode too).
def _read_only(path: Path) -> Path:
    path.write_text("keep me\n", encoding="utf-8")
    path.chmod(0o444)
    return path


def test_ask_batch_keeps_a_read_only_output(tmp_path: Path) -> None:
    out = _read_only(tmp_path / "out.jsonl")
    before = tree(tmp_path)
    code, errors, _ = ask_batch(tmp_path, LINE + "\n", "--output", out, "--overwrite")
    assert code == 1
    assert errors == [
        f"error: --output {out} is read-only (mode 0444): make it writable (chmod u+w) to "
        "replace it, or choose another path"
    ]
    assert tree(tmp_path) == before | {"b.jsonl": (LINE + "\n").encode()}
    assert os.stat(out).st_mode & 0o777 == 0o444


def test_split_keeps_a_read_only_train_file(tmp_path: Path) -> None:
    data = squad_file(tmp_path / "data" / "d.json", 10)
    (tmp_path / "out").mkdir()
    train = _read_only(tmp_path / "out" / "train.json")
    before = tree(tmp_path)
    code, errors, _ = run(["split", data, "--output-dir", tmp_path / "out", "--overwrite"])
    assert code == 1
    assert errors == [
        f"error: --output-dir {tmp_path / 'out'}: {train} is read-only (mode 0444): make it "
        "writable (chmod u+w) to replace it, or choose another path"
    ]
    assert tree(tmp_path) == before
    assert os.stat(train).st_mode & 0o777 == 0o444


def test_feedback_keeps_a_read_only_output(tmp_path: Path) -> None:
    verdict = {"question": "Who?", "context": "Alma", "verdict": "no_answer"}
    (tmp_path / "fb.jsonl").write_text(json.dumps(verdict) + "\n", encoding="utf-8")
    out = _read_only(tmp_path / "out.json")
    before = tree(tmp_path)
    code, errors, _ = run(["feedback", tmp_path / "fb.jsonl", "--output", out, "--overwrite"])
    assert code == 1
    assert errors == [
        f"error: --output {out} is read-only (mode 0444): make it writable (chmod u+w) to "
        "replace it, or choose another path"
    ]
    assert tree(tmp_path) == before


# Item 17: lines that misled.
@pytest.mark.parametrize("command", ["prepare", "train"])
def test_an_empty_config_is_not_told_to_pass_a_config(tmp_path: Path, command: str) -> None:
    (tmp_path / "empty.yaml").write_text("", encoding="utf-8")
    before = tree(tmp_path)
    args = [command, "--config", tmp_path / "empty.yaml", "--output-dir", tmp_path / "runs"]
    code, errors, _ = run(args)
    assert code == 1
    assert errors == [
        "error: no data given: pass --train-file FILE or --dataset NAME, or a --config file "
        "that sets data.train_file or data.dataset"
    ]
    assert tree(tmp_path) == before


@pytest.mark.parametrize("indent", [None, 1])
def test_feedback_of_a_squad_file_says_it_is_not_feedback(tmp_path: Path, indent: int) -> None:
    data = squad_file(tmp_path / "squad.json")
    data.write_text(json.dumps(json.loads(data.read_bytes()), indent=indent), encoding="utf-8")
    before = tree(tmp_path)
    code, errors, _ = run(["feedback", data, "--output", tmp_path / "out.json"])
    assert code == 1
    assert errors == [
        f"error: {data} is not a feedback file (its first line is not a verdict of serve "
        "--feedback-file): give the file that serve --feedback-file wrote"
    ]
    assert tree(tmp_path) == before


def test_split_says_what_it_wrote_once(tmp_path: Path) -> None:
    data = squad_file(tmp_path / "d.json", 10)
    out = tmp_path / "out"
    code, _, stdout = run(["split", data, "--output-dir", out])
    assert code == 0
    assert stdout.splitlines() == [
        "Folds grouped by title: 10 titles, at least 2 per fold",
        f"8 questions in {out / 'train.json'}, 2 held out in {out / 'heldout.json'} (fold 0 "
        "of 5, 10 documents, seed 42)",
    ]


# Item 11: index left the folder through `up -> ..` and indexed its neighbours.
def test_index_never_leaves_the_folder_through_a_link(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "loop").mkdir(parents=True)
    (docs / "a.txt").write_text("Alma Stroud designed the bridge.", encoding="utf-8")
    (tmp_path / "sibling").mkdir()
    (tmp_path / "sibling" / "s.txt").write_text("Another folder's text.", encoding="utf-8")
    os.symlink("../..", docs / "loop" / "up")
    os.symlink("../sibling/s.txt", docs / "s.txt")
    code, errors, stdout = run(["index", docs, "--output", tmp_path / "idx", "--encoder", "none"])
    assert code == 0
    assert errors == [
        f"skipped {docs / 'loop' / 'up'}: symbolic link out of the folder (to ../..): not followed",
        f"skipped {docs / 's.txt'}: symbolic link out of the folder (to ../sibling/s.txt): not "
        "followed",
        "note: 2 symbolic links out of the folder not followed (a folder's documents are the "
        "files under it): name what a link points to on the command line to index it",
    ]
    assert stdout.splitlines()[0].startswith(
        f"{tmp_path / 'idx'}: 1 documents, 1 passages (1 added, 0 changed, 0 unchanged, 0 "
        "removed, 2 skipped) in "
    )
