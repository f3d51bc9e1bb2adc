"""Swap negatives: a question asked of its own passage with one name or number it shares with
the passage swapped for one the passage never mentions; seeded, keeps the fraction, bad
settings and data without such questions fail in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sample_files import sample_data_path
from test_data_question_negatives import _records

from qa_finetune.config import Config, DataConfig
from qa_finetune.config.values import ConfigError
from qa_finetune.data.loading import load_data
from qa_finetune.data.records import DataError
from qa_finetune.data.swap_negatives import SUFFIX, names_in, swap_negatives


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return _records(sample_data_path("train"))


def _stems(text: str) -> set[str]:
    return {word[:5] for word in re.findall(r"\w+", text.lower())}


def test_names_in_finds_names_numbers_and_abbreviations_but_not_the_first_word() -> None:
    question = "When did the U.S. buy the Holy Roman Empire for 1,850 pounds in 7 days?"
    found = [text for _, _, text in names_in(question)]
    assert found == ["U.S.", "Holy Roman Empire", "1,850", "7"]
    for start, end, text in names_in(question):
        assert question[start:end] == text
    assert names_in("Paris is where?") == []


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_each_swap_keeps_the_passage_and_swaps_one_name_it_holds_for_one_it_never_mentions(
    records: list[dict], seed: int
) -> None:
    by_id = {r["id"]: r for r in records}
    swaps, report = swap_negatives(records, 1.0, seed)
    made = list(swaps)
    assert report.made == len(made) > 0
    assert report.made + report.no_substitute == report.chosen == report.eligible
    for swap in made:
        original = by_id[swap["id"].removesuffix(SUFFIX)]
        assert swap["answers"] == {"text": [], "answer_start": []}
        assert swap["context"] == original["context"]
        assert swap["title"] == original["title"]
        # Exactly one name of the original, one its passage holds, is replaced.
        matches = [
            (start, end, name)
            for start, end, name in names_in(original["question"])
            if name in original["context"]
            and swap["question"].startswith(original["question"][:start])
            and swap["question"].endswith(original["question"][end:])
        ]
        assert matches, (original["question"], swap["question"])
        start, end, _ = matches[0]
        tail = len(original["question"]) - end
        substitute = swap["question"][start : len(swap["question"]) - tail]
        assert substitute
        # The exact check: no word of the substitute (cut to five letters) is in the passage
        # or the original question, so the passage cannot answer the swapped question.
        assert not _stems(substitute) & (_stems(original["context"]) | _stems(original["question"]))


def test_the_choice_is_seeded_and_keeps_the_fraction(records: list[dict]) -> None:
    first, report = swap_negatives(records, 0.5, 7)
    first = list(first)
    assert report.chosen == round(0.5 * report.eligible)
    assert report.made + report.no_substitute == report.chosen
    assert list(swap_negatives(records, 0.5, 7)[0]) == first
    assert list(swap_negatives(records, 0.5, 8)[0]) != first
    assert list(swap_negatives(records, 0.0, 7)[0]) == []


def test_unanswerable_questions_are_never_swapped(records: list[dict]) -> None:
    unanswerable = [dict(r, answers={"text": [], "answer_start": []}) for r in records]
    swaps, report = swap_negatives(unanswerable, 1.0, 0)
    assert list(swaps) == [] and report.eligible == 0


def test_load_data_adds_swaps_and_other_paragraph_negatives(tmp_path: Path) -> None:
    train = sample_data_path("train")
    config = DataConfig(
        train_file=str(train),
        allow_no_answer=True,
        swap_negatives=1.0,
        question_negatives=0.5,
        validation_fraction=0.0,
    )
    loaded = load_data(config, seed=3, work_dir=tmp_path / "work")
    ids = list(loaded.splits["train"]["id"])
    swaps = [i for i in ids if i.endswith(SUFFIX)]
    others = [i for i in ids if i.endswith("#negative")]
    originals = len(_records(train))
    assert len(ids) == originals + len(swaps) + len(others)
    assert swaps and others
    # Other-paragraph negatives are made of answerable questions only, never of a swap.
    assert not any(i.startswith(tuple(s + "#" for s in swaps)) for i in others)


def test_swaps_asked_of_data_without_names_fail_in_one_line(tmp_path: Path) -> None:
    data = {
        "data": [
            {
                "title": "lower case",
                "paragraphs": [
                    {
                        "context": "the cat sat on the mat all day long.",
                        "qas": [
                            {
                                "id": "q1",
                                "question": "where did the cat sit?",
                                "answers": [{"text": "on the mat", "answer_start": 12}],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    config = DataConfig(
        train_file=str(path), allow_no_answer=True, swap_negatives=0.5, validation_fraction=0.0
    )
    with pytest.raises(DataError, match=r"data\.swap_negatives") as caught:
        load_data(config, work_dir=tmp_path / "work")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"swap_negatives": 1.5, "allow_no_answer": True}, r"must be in \[0, 1\], got 1.5"),
        ({"swap_negatives": -0.1, "allow_no_answer": True}, r"must be in \[0, 1\]"),
        ({"swap_negatives": 0.2}, "needs data.allow_no_answer=true"),
    ],
)
def test_bad_swap_settings_name_the_key(values: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        Config.from_dict({"data": values})
    assert "data.swap_negatives" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_setting_counts_in_the_features_fingerprint_only_when_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from types import SimpleNamespace

    from qa_finetune.features.windows import WindowSpec
    from qa_finetune.training import feature_cache

    monkeypatch.setattr(feature_cache, "tokenizer_fingerprint", lambda _: "tokenizer")
    spec, digests = WindowSpec(384, 128, True), {"train": [], "validation": []}

    def fingerprint(data: object) -> str:
        config = SimpleNamespace(data=data, train=SimpleNamespace(seed=42))
        return feature_cache.data_fingerprint(config, tmp_path, spec, digests)  # type: ignore[arg-type]

    unset = DataConfig(allow_no_answer=True)
    # Features cached before the setting existed (no such field) are found again unchanged.
    older = SimpleNamespace(**{k: v for k, v in vars(unset).items() if k != "swap_negatives"})
    assert fingerprint(unset) == fingerprint(older)
    assert fingerprint(DataConfig(allow_no_answer=True, swap_negatives=0.5)) != fingerprint(unset)
