"""The labeling journal: appended records replay in order, compaction keeps them, a line cut
short by a kill is skipped with a warning (and cut off), a damaged line elsewhere is an error."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from qa_finetune.labeling.journal import Journal, JournalError


def test_appended_records_replay_in_order(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.journal")
    journal.open()
    records = [{"op": "put", "id": str(n), "text": "a\r\nb ✓"} for n in range(3)]
    for record in records:
        journal.append(record)
    journal.close()
    assert Journal(tmp_path / "j.journal").replay() == records
    # One line per record: a CRLF inside a string is escaped, never a line break.
    assert (tmp_path / "j.journal").read_bytes().count(b"\n") == 3


def test_compaction_replaces_the_records_and_appends_continue(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.journal")
    journal.open()
    for n in range(5):
        journal.append({"n": n})
    journal.rewrite([{"n": 4}])
    journal.append({"n": 5})
    journal.close()
    assert Journal(tmp_path / "j.journal").replay() == [{"n": 4}, {"n": 5}]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_cut_last_line_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "j.journal"
    path.write_bytes(b'{"n": 1}\n{"n": 2}\n{"n": 3, "te')
    journal = Journal(path)
    journal.open()
    with caplog.at_level(logging.WARNING, logger="qa_finetune"):
        assert journal.replay() == [{"n": 1}, {"n": 2}]
    assert "line 3 was cut short" in caplog.text
    journal.append({"n": 4})  # starts on a line of its own
    journal.close()
    assert Journal(path).replay() == [{"n": 1}, {"n": 2}, {"n": 4}]


def test_a_whole_unterminated_last_line_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "j.journal"
    path.write_bytes(b'{"n": 1}\n{"n": 2}')
    journal = Journal(path)
    journal.open()
    assert journal.replay() == [{"n": 1}, {"n": 2}]
    journal.append({"n": 3})
    journal.close()
    assert Journal(path).replay() == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_a_damaged_line_before_the_last_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "j.journal"
    path.write_bytes(b'{"n": 1}\nnot json\n{"n": 3}\n')
    with pytest.raises(JournalError, match=r"line 2 is not a journal record"):
        Journal(path).replay()
    assert path.read_bytes() == b'{"n": 1}\nnot json\n{"n": 3}\n'


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    first = Journal(tmp_path / "j.journal")
    first.open()
    first.rewrite([{"n": 1}])  # the lock outlives compaction's new file
    with pytest.raises(JournalError, match="in use by another `qa-finetune label`"):
        Journal(tmp_path / "j.journal").open()
    first.close()
    second = Journal(tmp_path / "j.journal")
    second.open()
    second.close()


def test_every_append_is_one_json_line(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.journal")
    journal.open()
    journal.append({"q": "€ <script>"})
    journal.close()
    line = (tmp_path / "j.journal").read_text(encoding="utf-8")
    assert line == '{"q":"€ <script>"}\n' and json.loads(line) == {"q": "€ <script>"}
