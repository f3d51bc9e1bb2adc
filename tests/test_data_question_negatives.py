"""Question-level negatives: each is a question asked of another paragraph of its document that
holds none of its answers; the choice is seeded and keeps the fraction; bad settings fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sample_files import sample_data_path

from qa_finetune.config import Config, DataConfig
from qa_finetune.config.values import ConfigError
from qa_finetune.data.loading import load_data
from qa_finetune.data.question_negatives import SUFFIX, question_negatives
from qa_finetune.data.records import DataError


def _records(path: Path) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    return [
        {
            "id": qa["id"],
            "title": article["title"],
            "context": paragraph["context"],
            "question": qa["question"],
            "answers": {
                "text": [a["text"] for a in qa["answers"]],
                "answer_start": [a["answer_start"] for a in qa["answers"]],
            },
        }
        for article in data
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return _records(sample_data_path("train"))


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_no_negative_holds_one_of_its_answers_and_each_stays_in_its_document(
    records: list[dict], seed: int
) -> None:
    by_id = {r["id"]: r for r in records}
    negatives, report = question_negatives(records, 1.0, seed)
    made = list(negatives)
    assert report.made == len(made) > 0
    for negative in made:
        original = by_id[negative["id"].removesuffix(SUFFIX)]
        assert negative["answers"] == {"text": [], "answer_start": []}
        assert negative["question"] == original["question"]
        assert negative["title"] == original["title"]
        assert negative["context"] != original["context"]
        # The exact text check: no answer of the question appears in its negative passage.
        assert not any(text in negative["context"] for text in original["answers"]["text"])
        paragraphs = {r["context"] for r in records if r["title"] == original["title"]}
        assert negative["context"] in paragraphs


def test_a_passage_holding_an_answer_is_never_chosen() -> None:
    """Of two other paragraphs, the one that holds the answer text is skipped every time."""
    base = {"title": "Doc", "question": "Who?"}
    records = [
        {
            **base,
            "id": "q",
            "context": "Ada wrote it.",
            "answers": {"text": ["Ada"], "answer_start": [0]},
        },
        {
            **base,
            "id": "a",
            "context": "Later Ada left.",
            "answers": {"text": ["Later"], "answer_start": [0]},
        },
        {
            **base,
            "id": "b",
            "context": "Nothing here.",
            "answers": {"text": ["here"], "answer_start": [8]},
        },
    ]
    for seed in range(20):
        made = {n["id"]: n["context"] for n in question_negatives(records, 1.0, seed)[0]}
        assert made["q#negative"] == "Nothing here."


def test_the_same_seed_gives_the_same_negatives_and_the_fraction_is_kept(
    records: list[dict],
) -> None:
    first, report = question_negatives(records, 0.25, 7)
    first = list(first)
    again = list(question_negatives(records, 0.25, 7)[0])
    other = list(question_negatives(records, 0.25, 8)[0])
    assert first == again
    assert first != other
    assert report.chosen == round(0.25 * report.eligible)
    assert report.made + report.no_clean_passage == report.chosen
    assert list(question_negatives(records, 0.0, 7)[0]) == []


def test_load_data_adds_the_negatives_to_training_data(tmp_path: Path) -> None:
    train = sample_data_path("train")
    config = DataConfig(
        train_file=str(train), allow_no_answer=True, question_negatives=0.5, validation_fraction=0.0
    )
    loaded = load_data(config, seed=3, work_dir=tmp_path / "work")
    ids = list(loaded.splits["train"]["id"])
    negatives = [i for i in ids if i.endswith(SUFFIX)]
    originals = len(_records(train))
    assert len(ids) == originals + len(negatives)
    assert 0 < len(negatives) <= round(0.5 * originals)


def test_negatives_on_data_with_one_paragraph_per_document_fail_clearly(tmp_path: Path) -> None:
    records = _records(sample_data_path("train"))
    # Every paragraph its own document: no other paragraph of the same document exists.
    data = {
        "data": [
            {
                "title": f"doc {i}",
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
                ],
            }
            for i, r in enumerate(records)
        ]
    }
    path = tmp_path / "single.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    config = DataConfig(
        train_file=str(path), allow_no_answer=True, question_negatives=0.3, validation_fraction=0.0
    )
    with pytest.raises(DataError, match=r"no document .* second paragraph"):
        load_data(config, work_dir=tmp_path / "work")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"question_negatives": 1.5, "allow_no_answer": True}, r"must be in \[0, 1\], got 1.5"),
        ({"question_negatives": -0.1, "allow_no_answer": True}, r"must be in \[0, 1\]"),
        ({"question_negatives": 0.2}, "needs data.allow_no_answer=true"),
    ],
)
def test_bad_negative_settings_name_the_key(values: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        Config.from_dict({"data": values})
    assert "data.question_negatives" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_made_id_the_data_already_holds_gets_a_quote_until_it_is_new(
    records: list[dict],
) -> None:
    from qa_finetune.data.records import unused_id

    taken = {"q", "q#x", "q#x'"}
    assert unused_id("q#x", taken) == "q#x''" and "q#x''" in taken
    assert unused_id("r#x", taken) == "r#x"
    # The data already holds, for each question, a record with its negative's id.
    originals = {r["id"] for r in records}
    clashing = [*records, *({**r, "id": r["id"] + SUFFIX} for r in records)]
    made = [n["id"] for n in question_negatives(clashing, 1.0, 0)[0]]
    from_originals = [i for i in made if i.removesuffix("'").removesuffix(SUFFIX) in originals]
    assert from_originals and all(i.endswith(SUFFIX + "'") for i in from_originals)
    ids = [r["id"] for r in clashing] + made
    assert len(ids) == len(set(ids))
