"""Swap negatives (``data.swap_negatives``): a question with one of its names or numbers
replaced by one its passage never mentions, asked of the same passage, labelled "no answer".

Other-paragraph negatives (``data/question_negatives``) are easy: the passage is about
something else, and a reader that never saw one already ranks them apart (AUC 0.97). The
unanswerable questions people write against a passage keep nearly all of its words and change
what is asked about; the shipped reader ranks those barely above chance (AUC 0.58 on SQuAD
2.0, 0.61 on these swaps of held-out general questions). A swap is made the same way: the
question keeps every other word, the passage still holds the original answer (a plausible
wrong one), but the thing asked about is not there. The substitute is a name or number that
another question of the same document asks about (the same subject), or of any document when
none fits, and none of its words occurs in the passage or the question (so an alias of the
original is not taken).

A seeded ``fraction`` of the eligible questions (answerable, naming something their passage
holds, other than by their first word) get one twin each, with id ``<id>#swap``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from qa_finetune.data.question_negatives import question_columns
from qa_finetune.data.records import DataError, unused_id

SUFFIX = "#swap"
# The draws come from a stream of their own, apart from the other seeded choices of a run.
_STREAM = 11
# Tries at a substitute from all documents before a question is given up.
_TRIES = 50
_CAPITAL = "A-ZÀ-ÖØ-Þ"
# An abbreviation (U.S.), a number, or a run of capitalised words that may be joined by "of",
# "the", "de" ...
_TERM = re.compile(
    rf"\b(?:[{_CAPITAL}](?:\.[{_CAPITAL}])+\.?|(?:\d[\d,.]*\d|\d|[{_CAPITAL}][\w'’-]*"
    rf"(?:\s+(?:(?:of|the|de|von|van)\s+)?[{_CAPITAL}][\w'’-]*)*)\b)"
)
# Capitalised words that name nothing: question words, articles, prepositions.
_NOT_NAMES = frozenset(
    "What Who When Where Which How Why Whose Whom In The A An On At Of For To From By During "  # noqa: SIM905
    "After Before Is Are Was Were Did Do Does Can Could According As If I It This That".split()
)


@dataclass
class SwapReport:
    """How many swaps were made, and why some chosen questions got none."""

    eligible: int = 0  # answerable questions naming something their passage holds
    chosen: int = 0
    made: int = 0
    no_substitute: int = 0  # every name tried occurs in the passage or question


def swap_negatives(
    examples: Any, fraction: float, seed: int
) -> tuple[Iterator[dict[str, Any]], SwapReport]:
    """Swapped twins for a ``fraction`` of ``examples`` (a Dataset or list of validated
    records), and the report (filled once the iterator is consumed; ``eligible`` and
    ``chosen`` at once)."""
    columns = question_columns(examples)
    anchors = [
        [term for term in names_in(question) if term[2] in context] if texts else []
        for question, context, texts in zip(
            columns["question"], columns["context"], columns["texts"], strict=True
        )
    ]
    eligible = [i for i, found in enumerate(anchors) if found]
    report = SwapReport(eligible=len(eligible))
    rng = np.random.default_rng([seed, _STREAM])
    chosen = sorted(rng.permutation(eligible)[: round(fraction * len(eligible))].tolist())
    report.chosen = len(chosen)
    return _swaps(columns, anchors, chosen, rng, report), report


def names_in(question: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of each name or number in ``question``, but its first word."""
    return [
        (m.start(), m.end(), m.group(0))
        for m in _TERM.finditer(question)
        if m.start() > 0 and m.group(0) not in _NOT_NAMES
    ]


def _swaps(
    columns: dict[str, list[Any]],
    anchors: list[list[tuple[int, int, str]]],
    chosen: list[int],
    rng: np.random.Generator,
    report: SwapReport,
) -> Iterator[dict[str, Any]]:
    by_document, everywhere = _substitutes(columns, anchors)
    taken = set(columns["id"])
    for i in chosen:
        question, passage = columns["question"][i], columns["context"][i]
        start, end, term = anchors[i][rng.integers(len(anchors[i]))]
        kind, seen = _kind(term), _words(passage) | _words(question)
        same = by_document.get(columns["title"][i], {}).get(kind, [])
        substitute = _substitute(same, everywhere.get(kind, []), seen, rng)
        if substitute is None:
            report.no_substitute += 1
            continue
        new_id = unused_id(columns["id"][i] + SUFFIX, taken)
        report.made += 1
        yield {
            "id": new_id,
            "title": columns["title"][i],
            "context": passage,
            "question": question[:start] + substitute + question[end:],
            "answers": {"text": [], "answer_start": []},
        }


def _substitute(
    same: list[str], pool: list[str], seen: set[str], rng: np.random.Generator
) -> str | None:
    """A name of the same document none of whose words are ``seen``; else one of ``_TRIES``
    draws from ``pool``; else None."""
    near = [name for name in same if not _words(name) & seen]
    if near:
        return near[rng.integers(len(near))]
    draws = (pool[j] for j in rng.integers(len(pool), size=_TRIES)) if pool else iter(())
    return next((name for name in draws if not _words(name) & seen), None)


def _substitutes(
    columns: dict[str, list[Any]], anchors: list[list[tuple[int, int, str]]]
) -> tuple[dict[str, dict[str, list[str]]], dict[str, list[str]]]:
    """The names and numbers questions ask about, by document and kind, and over all
    documents by kind (sorted: the draws do not depend on set order)."""
    by_document: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    everywhere: dict[str, set[str]] = defaultdict(set)
    for title, found in zip(columns["title"], anchors, strict=True):
        for _, _, term in found:
            by_document[title][_kind(term)].add(term)
            everywhere[_kind(term)].add(term)
    return (
        {t: {k: sorted(v) for k, v in kinds.items()} for t, kinds in by_document.items()},
        {k: sorted(v) for k, v in everywhere.items()},
    )


def _kind(term: str) -> str:
    return "number" if term[0].isdigit() else "name"


def _words(text: str) -> set[str]:
    """The words of ``text`` cut to five letters, so "Europe", "European" and "Europeans"
    count as one word (an alias of what the passage names is not a substitute)."""
    return {word[:5] for word in re.findall(r"\w+", text.lower())}


def no_swaps_error(source: str) -> DataError:
    """The one-line error for swaps asked of data where no question names its passage."""
    return DataError(
        f"{source}: data.swap_negatives replaces a name or number that a question shares with "
        "its passage, but no answerable question here names one: use data with such "
        "questions, or set data.swap_negatives to 0"
    )
