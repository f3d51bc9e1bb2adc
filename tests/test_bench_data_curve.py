"""The data curve's samples (nested, seeded, the sizes it accepts) and its table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.data_curve import check_settings, nested_samples, parse_sizes, table, with_skills


def _records(count: int) -> list[dict[str, str]]:
    return [{"id": f"q{i}"} for i in range(count)]


def _ids(sample: list[dict[str, str]]) -> list[str]:
    return [record["id"] for record in sample]


def test_each_sample_holds_every_smaller_one() -> None:
    samples = nested_samples(_records(100), [5, 20, 60, None], seed=7)
    sizes = [len(samples[size]) for size in (5, 20, 60, None)]
    assert sizes == [5, 20, 60, 100]
    assert set(_ids(samples[5])) < set(_ids(samples[20])) < set(_ids(samples[60]))
    assert _ids(samples[None]) == _ids(_records(100))


def test_samples_keep_the_file_order_and_depend_on_the_seed() -> None:
    first = nested_samples(_records(200), [30], seed=1)[30]
    again = nested_samples(_records(200), [30], seed=1)[30]
    other = nested_samples(_records(200), [30], seed=2)[30]
    assert _ids(first) == _ids(again)
    assert _ids(first) != _ids(other)
    assert _ids(first) == sorted(_ids(first), key=lambda name: int(name[1:]))


def test_sizes_are_parsed_and_checked_against_the_data() -> None:
    assert parse_sizes("128, 512,ALL", 1000) == [128, 512, None]
    with pytest.raises(SystemExit, match="2000 is not between 1 and the 1000 questions"):
        parse_sizes("128,2000", 1000)
    with pytest.raises(SystemExit, match="0 is not between"):
        parse_sizes("0", 1000)


def test_a_work_folder_is_continued_only_with_its_own_settings(tmp_path: Path) -> None:
    settings = {
        "general": "outputs/general",
        "encoder": "enc",
        "config": "c.yaml",
        "train": "t.json",
        "heldout": "h.json",
        "test": "d.json",
        "steps": 150,
        "seed": 42,
        "work": str(tmp_path),
    }
    check_settings(argparse.Namespace(**settings))
    check_settings(argparse.Namespace(**settings))  # the same settings continue it
    with pytest.raises(SystemExit, match="other seed, steps: pass the same settings"):
        check_settings(argparse.Namespace(**{**settings, "steps": 300, "seed": 1}))


def test_a_point_saved_without_the_skills_gets_them_from_its_test_report(tmp_path: Path) -> None:
    point = {"start": "general", "questions": 128, "steps": 150, "train_minutes": 1.0,
             "threshold": -0.5, "heldout_f1": 50.0, "f1": 55.0, "HasAns_f1": 10.0,
             "NoAns_exact": 90.0}  # fmt: skip
    assert "| 90.00 | — | — |" in table([point])  # no report yet: shown as missing
    (tmp_path / "test").mkdir()
    report = {"HasAns_f1_answering_all": 40.68, "no_answer_auc": 0.6351, "f1": 99.0}
    (tmp_path / "test" / "metrics.json").write_text(json.dumps(report))
    filled = with_skills(dict(point), tmp_path)
    assert filled == {**point, "HasAns_f1_answering_all": 40.68, "no_answer_auc": 0.6351}
    assert table([filled]).splitlines()[-1].endswith("| 90.00 | 40.68 | 0.635 |")
