"""Round five of bad inputs, the answers of a data file: answers of the wrong shape are refused
as malformed (never kept as unanswerable questions), and the lines that say so count them
right. Every case ends before a model loads."""

from __future__ import annotations

import json
from pathlib import Path

from round4_files import CONTEXT, squad_file, tree
from typer.testing import CliRunner

from qa_finetune.cli.app import app


def run(args: list[object]) -> tuple[int, list[str], str]:
    """Exit code, stderr lines and stdout of the CLI called with ``args``."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stderr.splitlines(), result.stdout


def _nested_with(path: Path, answers: dict[str, object]) -> Path:
    """A SQuAD file of six articles whose questions q<n>-0 have the given raw ``answers``."""
    squad_file(path, 6)
    payload = json.loads(path.read_bytes())
    for article in payload["data"]:
        qa = article["paragraphs"][0]["qas"][0]
        qa["answers"] = answers.get(qa["id"], qa["answers"])
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


MALFORMED = {
    "q0-0": {"text": "Alma Stroud", "answer_start": 0},  # an object where a list belongs
    "q1-0": "Alma Stroud",  # a string
    "q2-0": [{"text": 5, "answer_start": 0}],  # a number as the text
}


# Item 8: malformed answers are not "no answer", even with --allow-no-answer.
def test_evaluate_leaves_out_malformed_answers_by_reason(tmp_path: Path) -> None:
    data = _nested_with(tmp_path / "d.json", MALFORMED)
    predictions = {f"q{n}-0": "" if n < 3 else "Alma Stroud" for n in range(6)}
    (tmp_path / "p.json").write_text(json.dumps(predictions), encoding="utf-8")
    args = ["evaluate", "--predictions", tmp_path / "p.json", "--data", data, "--allow-no-answer"]
    code, _, out = run([*args, "--report-dir", tmp_path / "report"])
    assert code == 0
    assert (
        "Left out 3 unusable questions: 1 malformed answers field (an object, not a list of "
        "{text, answer_start} objects), 1 malformed answers field (a string, not a list of "
        "{text, answer_start} objects), 1 malformed answers field (an answer text is a number, "
        "not a string)"
    ) in out.splitlines()
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_bytes())
    # Before, the three were unanswerable questions answered "": NoAns 100 on 3.
    assert (metrics["NoAns_total"], metrics["HasAns_total"], metrics["exact_match"]) == (
        0,
        3,
        100.0,
    )


def test_split_refuses_only_malformed_answers_without_the_no_answer_hint(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "context": CONTEXT, "question": "Who?", "answers": {"foo": [1]}},
        {"id": "b", "context": CONTEXT, "question": "Who?", "answers": {"text": [7]}},
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    before = tree(tmp_path)
    code, errors, _ = run(["split", data, "--output-dir", tmp_path / "out", "--allow-no-answer"])
    assert code == 1
    assert errors == [
        "note: 2 of 2 examples dropped (1 malformed answers field (an object without 'text': "
        "give {text: [...], answer_start: [...]}); 1 malformed answers field (an answer text is "
        "a number, not a string); first: a (record 1 of d.jsonl): malformed answers field (an "
        "object without 'text': give {text: [...], answer_start: [...]}))",
        f"error: {data}: no usable examples to cross-validate; check the file",
    ]
    assert tree(tmp_path) == before


# Item 9: more answer texts than starts is refused, naming the mismatch.
def test_a_record_with_more_texts_than_starts_is_refused(tmp_path: Path) -> None:
    record = {"text": ["Alma Stroud", "x"], "answer_start": [0]}
    rows = [
        {"id": f"r{n}", "context": f"{CONTEXT} {n}", "question": "Who?", "answers": record}
        if n == 0
        else {
            "id": f"r{n}",
            "context": f"{CONTEXT} {n}",
            "question": "Who?",
            "answers": {"text": ["Alma Stroud"], "answer_start": [0]},
        }
        for n in range(6)
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    code, errors, _ = run(["split", data, "--output-dir", tmp_path / "out"])
    assert code == 0
    assert errors == [
        "note: 1 of 6 examples dropped (first: r0 (record 1 of d.jsonl): malformed answers "
        "field (2 answer texts but 1 answer_start values: give one answer_start per text))"
    ]
    written = json.loads((tmp_path / "out" / "train.json").read_bytes())
    written |= {"held": json.loads((tmp_path / "out" / "heldout.json").read_bytes())["data"]}
    ids = {
        q["id"]
        for a in written["data"] + written["held"]
        for p in a["paragraphs"]
        for q in p["qas"]
    }
    assert ids == {"r1", "r2", "r3", "r4", "r5"}


# Item 17: an all-malformed CSV counts what it dropped ("dropped 0: ..." read as none).
def test_prepare_of_an_all_malformed_csv_counts_the_dropped(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    rows = "".join(f"{n},{CONTEXT},Who?,Alma\n" for n in range(3))
    data.write_text("id,context,question,answers\n" + rows, encoding="utf-8")
    before = tree(tmp_path)
    code, errors, _ = run(["prepare", "--train-file", data, "--output-dir", tmp_path / "out"])
    assert code == 1
    assert errors[-1] == (
        f"error: {data}: no usable examples (all 3 examples dropped; first: 0 (record 1 of "
        "d.csv): malformed answers field (a string, not a list of {text, answer_start} "
        "objects)); check the file's fields"
    )
    assert tree(tmp_path) == before
