"""Loading every supported format and validating examples."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from sample_files import sample_data_path

from qa_finetune.config import DataConfig
from qa_finetune.data.loading import load_data
from qa_finetune.data.records import DataError
from qa_finetune.data.validation import SplitReport, validate_records

CONTEXT = "The Orrin Library opened in 1907. The Orrin Library holds maps."


def _record(**overrides: object) -> dict:
    record = {
        "id": "q1",
        "title": "Orrin",
        "context": CONTEXT,
        "question": "When did it open?",
        "answers": {"text": ["1907"], "answer_start": [28]},
    }
    record.update(overrides)
    return record


def _squad(records: list[dict]) -> dict:
    return {
        "data": [
            {
                "title": "Orrin",
                "paragraphs": [
                    {
                        "context": r["context"],
                        "qas": [
                            {
                                "id": r["id"],
                                "question": r["question"],
                                "answers": [
                                    {"text": t, "answer_start": s}
                                    for t, s in zip(
                                        r["answers"]["text"],
                                        r["answers"]["answer_start"],
                                        strict=True,
                                    )
                                ],
                            }
                        ],
                    }
                    for r in records
                ],
            }
        ]
    }


def test_correct_example_is_kept_unchanged() -> None:
    report = SplitReport()
    kept = validate_records([_record()], allow_no_answer=False, report=report)
    assert kept[0]["answers"] == {"text": ["1907"], "answer_start": [28]}
    assert (report.examples_kept, report.answers_repaired, report.examples_dropped) == (1, 0, 0)


def test_wrong_offset_with_unique_text_is_repaired() -> None:
    report = SplitReport()
    kept = validate_records(
        [_record(answers={"text": ["1907"], "answer_start": [3]})], False, report
    )
    assert kept[0]["answers"]["answer_start"] == [28]
    assert report.answers_repaired == 1


def test_repeated_text_is_repaired_to_the_nearest_occurrence_only_when_close() -> None:
    second = CONTEXT.index("Orrin Library", 10)
    report = SplitReport()
    near = _record(answers={"text": ["Orrin Library"], "answer_start": [second + 3]})
    far = _record(id="q2", answers={"text": ["Orrin Library"], "answer_start": [second + 500]})
    kept = validate_records([near, far], False, report)
    assert [k["answers"]["answer_start"] for k in kept] == [[second]]
    assert report.drop_reasons == {"answer not found in context": 1}


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"context": "   "}, "empty or missing context"),
        ({"question": ""}, "empty or missing question"),
        ({"question": None}, "empty or missing question"),
        ({"answers": {"text": ["Paris"], "answer_start": [0]}}, "answer not found in context"),
        ({"answers": {"text": [], "answer_start": []}}, "no answer"),
    ],
)
def test_bad_examples_are_dropped_with_a_reason(overrides: dict, reason: str) -> None:
    report = SplitReport()
    assert validate_records([_record(**overrides)], False, report) == []
    assert report.examples_dropped == 1
    assert any(reason in r for r in report.drop_reasons)


def test_unanswerable_kept_in_v2_and_duplicates_dropped() -> None:
    report = SplitReport()
    records = [_record(answers={"text": [], "answer_start": []}), _record()]
    kept = validate_records(records, allow_no_answer=True, report=report)
    assert len(kept) == 1 and kept[0]["answers"]["text"] == []
    assert report.unanswerable == 1
    assert report.drop_reasons == {"duplicated id": 1}


def test_answer_whitespace_is_trimmed() -> None:
    report = SplitReport()
    kept = validate_records(
        [_record(answers={"text": [" 1907 "], "answer_start": [27]})], False, report
    )
    assert kept[0]["answers"] == {"text": ["1907"], "answer_start": [28]}
    assert report.answers_repaired == 0


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".csv", ".parquet", ".squad.json"])
def test_every_format_loads_to_the_same_columns(tmp_path: Path, suffix: str) -> None:
    records = [
        _record(),
        _record(
            id="q2",
            question="What does it hold?",
            answers={"text": ["maps"], "answer_start": [CONTEXT.index("maps")]},
        ),
    ]
    path = tmp_path / f"data{suffix}"
    if suffix == ".squad.json":
        path.write_text(json.dumps(_squad(records)))
    elif suffix in (".json", ".jsonl"):
        path.write_text("\n".join(json.dumps(r) for r in records))
    else:
        frame = pd.DataFrame(records)
        if suffix == ".csv":
            frame["answers"] = frame["answers"].map(json.dumps)
            frame.to_csv(path, index=False)
        else:
            frame.to_parquet(path)
    loaded = load_data(DataConfig(train_file=str(path), validation_fraction=0.0))
    train = loaded.splits["train"]
    assert train.column_names == ["id", "title", "context", "question", "answers"]
    assert train["answers"][1] == {"text": ["maps"], "answer_start": [CONTEXT.index("maps")]}


def test_configurable_column_names(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(
        json.dumps(
            {"q": "When?", "passage": CONTEXT, "ans": {"text": ["1907"], "answer_start": [28]}}
        )
    )
    config = DataConfig(
        train_file=str(path),
        question_column="q",
        context_column="passage",
        answers_column="ans",
        validation_fraction=0.0,
    )
    assert load_data(config).splits["train"]["question"] == ["When?"]


def test_missing_column_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"q": "When?", "context": CONTEXT}))
    with pytest.raises(DataError, match=r"missing column 'question'.*data\.question_column"):
        load_data(DataConfig(train_file=str(path)))


def test_malformed_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(_record()) + "\n{not json\n")
    with pytest.raises(DataError, match=r"d\.jsonl:2"):
        load_data(DataConfig(train_file=str(path)))


def test_no_usable_examples_and_strict(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(_record(context="")))
    with pytest.raises(DataError, match="no usable examples"):
        load_data(DataConfig(train_file=str(path)))
    path.write_text(json.dumps(_record(answers={"text": ["1907"], "answer_start": [0]})))
    with pytest.raises(DataError, match="--strict"):
        load_data(DataConfig(train_file=str(path), validation_fraction=0.0, strict=True))


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        load_data(DataConfig(train_file=str(tmp_path / "x.json")))
    other = tmp_path / "x.txt"
    other.write_text("hello")
    with pytest.raises(DataError, match="unsupported"):
        load_data(DataConfig(train_file=str(other)))


def test_held_out_validation_never_shares_a_context() -> None:
    loaded = load_data(
        DataConfig(train_file=str(sample_data_path("train")), validation_fraction=0.2)
    )
    train_contexts = set(loaded.splits["train"]["context"])
    assert loaded.splits["validation"].num_rows > 0
    assert not train_contexts & set(loaded.splits["validation"]["context"])


def test_bundled_sample_data_is_clean() -> None:
    for name, minimum in (("train", 200), ("validation", 100)):
        config = DataConfig(
            train_file=str(sample_data_path(name)), validation_fraction=0.0, strict=True
        )
        assert load_data(config).splits["train"].num_rows >= minimum
    v2 = DataConfig(
        train_file=str(sample_data_path("unanswerable")),
        validation_fraction=0.0,
        allow_no_answer=True,
        strict=True,
    )
    loaded = load_data(v2)
    assert loaded.reports["train"].unanswerable >= 10
    paragraphs = {
        c
        for n in ("train", "validation")
        for c in load_data(
            DataConfig(train_file=str(sample_data_path(n)), validation_fraction=0.0)
        ).splits["train"]["context"]
    }
    assert len(paragraphs) >= 60


def test_several_files_join_with_commas() -> None:
    files = f"{sample_data_path('train')},{sample_data_path('validation')}"
    loaded = load_data(DataConfig(train_file=files, validation_fraction=0.0))
    assert loaded.splits["train"].num_rows >= 300


def test_dataset_name_loads_through_datasets(tmp_path: Path) -> None:
    # A local dataset folder goes through `datasets.load_dataset`, the code path of a Hub
    # name such as "squad", with the Hub's column layout.
    from qa_finetune.config import DataConfig
    from qa_finetune.data.loading import load_data

    records = [
        {
            "id": f"q{i}",
            "title": "T",
            "context": f"Ada built {i} bridges.",
            "question": "How many bridges?",
            "answers": {"text": [str(i)], "answer_start": [10]},
        }
        for i in range(1, 7)
    ]
    folder = tmp_path / "my_squad"
    folder.mkdir()
    for split, rows in (("train", records[:4]), ("validation", records[4:])):
        lines = "\n".join(json.dumps(r) for r in rows)
        (folder / f"{split}.jsonl").write_text(lines + "\n", encoding="utf-8")
    loaded = load_data(DataConfig(dataset=str(folder)))
    assert loaded.splits["train"]["id"] == ["q1", "q2", "q3", "q4"]
    assert loaded.splits["validation"]["answers"][1] == {"text": ["6"], "answer_start": [10]}
    assert loaded.sources["train"] == f"{folder}:train"


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_non_utf8_data_is_a_one_line_error(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"d{suffix}"
    path.write_bytes(json.dumps(_record()).encode() + b"\n" + b'{"context": "caf\xe9"}\n')
    with pytest.raises(
        DataError, match=r"not UTF-8 text \(byte 0xe9 on line 2\): save it as UTF-8"
    ):
        load_data(DataConfig(train_file=str(path)))


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_utf8_bom_is_accepted(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"d{suffix}"
    body = json.dumps([_record()]) if suffix == ".json" else json.dumps(_record())
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    loaded = load_data(DataConfig(train_file=str(path), validation_fraction=0.0))
    assert loaded.splits["train"]["id"] == [_record()["id"]]


def test_record_without_context_is_dropped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    second = {k: v for k, v in _record(id="b").items() if k != "context"}
    path.write_text("\n".join(json.dumps(r) for r in (_record(id="a"), second)) + "\n")
    loaded = load_data(DataConfig(train_file=str(path), validation_fraction=0.0))
    report = loaded.reports["train"]
    assert loaded.splits["train"]["id"] == ["a"]
    assert report.examples_dropped == 1
    assert report.samples == ["b (record 2 of d.jsonl): no 'context' field"]


def test_malformed_pretty_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('[\n  {"id": "a",\n   "context": "x" "question": "y"}\n]\n')
    with pytest.raises(
        DataError, match=r"d\.json:3:19: not valid JSON \(Expecting ',' delimiter\)"
    ):
        load_data(DataConfig(train_file=str(path)))


def test_directory_as_data_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"is a directory, not a file: pass a file inside it"):
        load_data(DataConfig(train_file=str(tmp_path)))
