"""Passages: spans of the document's own text, within the word limit, covering every word."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qa_finetune.retrieval.passages import split_passages


def words_of(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\S+", text)]


def test_paragraphs_join_up_to_the_limit_and_keep_crlf() -> None:
    text = "Title\r\n\r\nFirst para. Second sentence here! Third?\r\n\r\n\r\n  Another block  \n"
    spans = split_passages(text, max_words=5)
    assert [text[s:e] for s, e in spans] == [
        "Title",
        "First para. Second sentence here!",
        "Third?\r\n\r\n\r\n  Another block",
    ]
    whole = split_passages(text, max_words=50)
    assert [text[s:e] for s, e in whole] == [text.strip()]


def test_a_sentence_longer_than_the_limit_is_cut_between_words() -> None:
    text = "one two three four five six seven"
    assert [text[s:e] for s, e in split_passages(text, 3)] == [
        "one two three",
        "four five six",
        "seven",
    ]


def test_empty_and_blank_texts_have_no_passages() -> None:
    assert split_passages("", 3) == []
    assert split_passages(" \r\n\r\n\t ", 3) == []
    with pytest.raises(ValueError):
        split_passages("text", 0)


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ab é🙂.!?\n\r\t\"')")), max_size=300),
    st.integers(1, 12),
)
def test_passages_cover_every_word_once_within_the_limit(text: str, limit: int) -> None:
    spans = split_passages(text, limit)
    covered = []
    previous_end = 0
    for start, end in spans:
        assert previous_end <= start < end <= len(text)
        assert not text[start].isspace() and not text[end - 1].isspace()
        inside = [w for w in words_of(text) if start <= w[0] and w[1] <= end]
        assert 1 <= len(inside) <= limit
        covered.extend(inside)
        previous_end = end
    assert covered == words_of(text)
