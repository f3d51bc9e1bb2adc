"""What a model trained on, kept small: 32-bit hashes of its questions' ids, of each
(question, context) pair and of each context, the texts normalised first.

A reader answers the questions it trained on better than new ones, so a score or a calibration
measured on them says little about new questions. The hashes let any later command tell which
of its questions and passages the model saw, without keeping the data: about 4 bytes a hash
once sorted, delta-coded, deflated and base64-coded (``bench/reports/21-training-record.md``).

Texts are compared after NFKC, case folding and collapsing whitespace, so a context copied with
other line breaks is the same passage. A context of several paragraphs (blank-line separated,
as ``data/whole_documents`` joins them) also records each paragraph as a passage and the
question with the paragraph holding its first answer, so the question asked again of one
paragraph, or of a document that contains that paragraph, is found.
"""

from __future__ import annotations

import base64
import hashlib
import re
import unicodedata
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from qa_finetune.errors import QAFinetuneError

FORMAT = 1
HASH = "blake2b-32"
_HASH_BYTES = 4
_KINDS = ("ids", "pairs", "passages")
# A deflated set of hashes never inflates past this (4 bytes a hash: 16M hashes).
_MAX_INFLATED = 64 << 20
PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")


class TrainingDataError(QAFinetuneError):
    """A training-data record that cannot be read."""


def normalise(text: str) -> str:
    """NFKC, case folded, each run of whitespace one space, the ends stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def text_hash(text: str) -> int:
    """A 32-bit hash of ``text``: at 100,000 hashes recorded, a new text matches one by
    chance about once in 43,000."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_HASH_BYTES)
    return int.from_bytes(digest.digest(), "big")


def pair_hash(question: str, context: str) -> int:
    """The hash of a question with its context, both normalised already."""
    return text_hash(f"{question}\x00{context}")


@lru_cache(maxsize=4096)
def normalised_context(context: str) -> str:
    """``normalise(context)``, cached: many questions share one context."""
    return normalise(context)


def paragraphs(context: str) -> list[tuple[int, str]]:
    """(start, text) of each blank-line-separated paragraph of ``context`` with any text."""
    found, start = [], 0
    for match in PARAGRAPH_BREAK.finditer(context):
        found.append((start, context[start : match.start()]))
        start = match.end()
    found.append((start, context[start:]))
    return [(at, text) for at, text in found if text.strip()]


@dataclass(frozen=True)
class TrainingFingerprint:
    """The hashes of what a model trained on, where they came from, and what it also trained
    on that has no record (a parent run older than the record)."""

    ids: frozenset[int]
    pairs: frozenset[int]
    passages: frozenset[int]
    sources: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()

    def union(self, other: TrainingFingerprint) -> TrainingFingerprint:
        """What either trained on: a run started from another counts its parent's too."""
        return TrainingFingerprint(
            self.ids | other.ids,
            self.pairs | other.pairs,
            self.passages | other.passages,
            _joined(self.sources, other.sources),
            _joined(self.unknown, other.unknown),
        )

    def with_unknown(self, what: str) -> TrainingFingerprint:
        """This record, saying it also trained on ``what``, whose data has no record."""
        return TrainingFingerprint(
            self.ids, self.pairs, self.passages, self.sources, _joined(self.unknown, (what,))
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: counts and provenance to read, the hashes packed."""
        return {
            "format": FORMAT,
            "hash": HASH,
            "normalised": "NFKC, case folded, whitespace collapsed",
            "questions": len(self.ids),
            "passages": len(self.passages),
            "sources": list(self.sources),
            "unknown": list(self.unknown),
            **{f"{kind[:-1]}_hashes": _pack(getattr(self, kind)) for kind in _KINDS},
        }

    @classmethod
    def from_dict(cls, values: Any, source: str) -> TrainingFingerprint:
        """Read ``to_dict``'s form back; anything else is one line naming ``source``."""
        if not isinstance(values, Mapping):
            raise damaged(source, "not a JSON object")
        if values.get("format") != FORMAT or values.get("hash") != HASH:
            raise damaged(source, f"format {values.get('format')!r}, hash {values.get('hash')!r}")
        ids, pairs, passages = (
            _unpack(values.get(f"{kind[:-1]}_hashes"), source, f"{kind[:-1]}_hashes")
            for kind in _KINDS
        )
        names = [_names(values.get(key, []), source, key) for key in ("sources", "unknown")]
        return cls(ids, pairs, passages, *names)


def fingerprint_of(records: Iterable[Mapping[str, Any]], source: str) -> TrainingFingerprint:
    """The hashes of ``records`` (flat examples: id, question, context, answers) as trained,
    named ``source``."""
    ids: set[int] = set()
    pairs: set[int] = set()
    passages: set[int] = set()
    for record in records:
        ids.add(text_hash(str(record["id"])))
        question, context = normalise(record["question"]), record["context"]
        whole = normalised_context(context)
        pairs.add(pair_hash(question, whole))
        passages.add(text_hash(whole))
        parts = paragraphs(context)
        if len(parts) < 2:
            continue
        passages.update(text_hash(normalised_context(text)) for _, text in parts)
        starts = (record.get("answers") or {}).get("answer_start") or []
        if starts:
            holding = [text for at, text in parts if at <= starts[0] < at + len(text)]
            pairs.update(pair_hash(question, normalised_context(text)) for text in holding)
    return TrainingFingerprint(frozenset(ids), frozenset(pairs), frozenset(passages), (source,))


def damaged(source: str, why: str) -> TrainingDataError:
    return TrainingDataError(
        f"{source} is damaged ({why}): copy it again from the run that trained the model, or "
        "delete it (the model's training data is then unknown)"
    )


def _names(items: Any, source: str, key: str) -> tuple[str, ...]:
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise damaged(source, f"{key!r} is not a list of names")
    return tuple(items)


def _joined(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *second)))


def _pack(values: frozenset[int]) -> str:
    """Sorted, as gaps (small numbers whose high bytes are mostly zero), deflated, base64."""
    ordered = np.array(sorted(values), dtype=np.uint32)
    gaps = np.diff(ordered, prepend=np.uint32(0)).astype(">u4")
    return base64.b64encode(zlib.compress(gaps.tobytes(), 9)).decode("ascii")


def _unpack(text: Any, source: str, kind: str) -> frozenset[int]:
    if not isinstance(text, str):
        raise damaged(source, f"{kind!r} is missing")
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(base64.b64decode(text, validate=True), _MAX_INFLATED)
        complete = inflater.eof and not inflater.unconsumed_tail
    except (ValueError, zlib.error):
        raise damaged(source, f"{kind!r} is not deflated base64") from None
    if not complete or len(raw) % _HASH_BYTES:
        raise damaged(source, f"{kind!r} is cut short")
    values = np.cumsum(np.frombuffer(raw, dtype=">u4").astype(np.uint64))
    if len(values) and values[-1] >= 1 << 32:
        raise damaged(source, f"{kind!r} holds hashes out of range")
    return frozenset(values.tolist())
