"""A teacher whose tokenizer holds the student's word pieces under other ids.

all-mpnet-base-v2 keeps BERT's uncased vocabulary, its ids shifted by its own special tokens,
and lays a pair out as ``<s> A </s></s> B </s>`` where BERT writes ``[CLS] A [SEP] B [SEP]``.
Such a teacher can read the student's own windows rewritten in its ids: its logits then line
up with the student's tokens one to one, once the logit of the separator its template adds is
dropped. Nothing here is assumed: the two tokenizers must split text alike (normalizer,
pre-tokenizer and word-piece model settings), every word piece of the student must be in the
teacher's vocabulary, and on a probe pair the teacher's own pair call must equal the student's
rewritten one, or there is no bridge.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

# Cased and uncased words, an accent, digits and punctuation: what the two must split alike.
_PROBE = ("When did Émile's Café open, and why?", "It opened in 1923 (after the war) in Lyon.")
# Roles whose tokens map by role, not by string ([CLS] becomes <s>, not the word "[CLS]").
_ROLES = (
    "cls_token",
    "sep_token",
    "pad_token",
    "unk_token",
    "mask_token",
    "bos_token",
    "eos_token",
)
# Word-piece settings that decide how a word is split, whatever the vocabulary.
_MODEL_KEYS = ("type", "continuing_subword_prefix", "max_input_chars_per_word")
# A tokenizer without a real length limit reports a huge model_max_length.
_NO_LIMIT = 1_000_000


class NoBridge(ValueError):
    """The teacher's tokenizer cannot read the student's windows; says why."""


@dataclass(frozen=True)
class TokenBridge:
    """Rewrites student windows in the teacher's ids (and back, for the logits)."""

    ids: np.ndarray  # student token id -> teacher token id
    student_separator: int
    teacher_separator: int
    extra_separator: bool  # the teacher's template adds a separator after the first one
    type_ids: bool  # the teacher takes token_type_ids

    def teacher_columns(self, features: Any) -> tuple[dict[str, list[list[int]]], np.ndarray]:
        """The windows in the teacher's ids (unpadded columns for ``predict_features``), and
        per window the position of the added separator (-1 where none is added)."""
        input_ids = features["input_ids"]
        types = features["token_type_ids"] if self.type_ids else None
        columns: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": []}
        if types is not None:
            columns["token_type_ids"] = []
        added = np.full(len(input_ids), -1, dtype=np.int64)
        for row, window in enumerate(input_ids):
            ids = self.ids[np.asarray(window, dtype=np.int64)].tolist()
            kinds = list(types[row]) if types is not None else None
            if self.extra_separator:
                at = list(window).index(self.student_separator) + 1
                ids.insert(at, self.teacher_separator)
                if kinds is not None:
                    kinds.insert(at, kinds[at - 1])
                added[row] = at
            columns["input_ids"].append(ids)
            columns["attention_mask"].append([1] * len(ids))
            if kinds is not None:
                columns["token_type_ids"].append(kinds)
        return columns, added

    def student_mask(self, lengths: np.ndarray, added: np.ndarray, width: int) -> np.ndarray:
        """``[windows, width]``: True on the teacher positions that are student tokens (the
        window's own, less the added separator)."""
        keep = np.arange(width) < lengths[:, None]
        rows = np.flatnonzero(added >= 0)
        keep[rows, added[rows]] = False
        return keep


def _splitting(tokenizer: Any) -> dict[str, Any]:
    """What decides how a tokenizer splits text, read from its backend's own description."""
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    model = state.get("model") or {}
    return {
        "normalizer": state.get("normalizer"),
        "pre_tokenizer": state.get("pre_tokenizer"),
        "model": {key: model.get(key) for key in _MODEL_KEYS},
    }


def _id_map(teacher: Any, student: Any) -> np.ndarray:
    theirs = teacher.get_vocab()
    specials: dict[str, int] = {}
    for role in _ROLES:
        ours, their = getattr(student, role, None), getattr(teacher, role, None)
        if ours is not None and their is not None and their in theirs:
            specials[str(ours)] = theirs[str(their)]
    ours_vocab = student.get_vocab()
    ids = np.full(max(ours_vocab.values()) + 1, theirs.get(str(teacher.unk_token), 0))
    missing = []
    for piece, index in ours_vocab.items():
        found = specials.get(piece, theirs.get(piece))
        if found is None:
            missing.append(piece)
        else:
            ids[index] = found
    if missing:
        raise NoBridge(
            f"{len(missing)} of the student's {len(ours_vocab)} tokens are not in the "
            f"teacher's vocabulary (such as {missing[0]!r})"
        )
    return ids.astype(np.int64)


def _pair(tokenizer: Any) -> dict[str, list[int]]:
    return dict(tokenizer(*_PROBE, return_token_type_ids=True))


def _layout(ids: np.ndarray, pairs: tuple[dict, dict], separators: tuple[int, int]) -> bool:
    """Whether the teacher's pair template adds a separator after the first one (else the
    templates agree), from the probe ``pairs`` (student's, teacher's) and ``separators``
    (theirs too); ``NoBridge`` when the rewritten probe is not the teacher's own call."""
    ours, theirs = pairs
    rewritten = ids[np.asarray(ours["input_ids"])].tolist()
    if rewritten == theirs["input_ids"]:
        return False
    at = ours["input_ids"].index(separators[0]) + 1
    if [*rewritten[:at], separators[1], *rewritten[at:]] == theirs["input_ids"]:
        return True
    raise NoBridge(
        "on the same question and passage the teacher's tokens are not the student's "
        "rewritten in its ids (another pair layout or other word pieces)"
    )


def find_bridge(teacher: Any, student: Any, max_length: int) -> TokenBridge:
    """The bridge from ``student``'s windows of up to ``max_length`` tokens to ``teacher``'s
    ids (both fast tokenizers); ``NoBridge`` says why there is none."""
    if not (getattr(teacher, "is_fast", False) and getattr(student, "is_fast", False)):
        raise NoBridge("both tokenizers must be fast tokenizers (tokenizer.json)")
    if _splitting(teacher) != _splitting(student):
        raise NoBridge("they split text differently (normalizer, pre-tokenizer or word pieces)")
    ids = _id_map(teacher, student)
    pairs = _pair(student), _pair(teacher)
    extra = _layout(ids, pairs, (student.sep_token_id, teacher.sep_token_id))
    type_ids = "token_type_ids" in teacher.model_input_names
    if type_ids and "token_type_ids" not in student.model_input_names:
        raise NoBridge("the teacher takes token type ids and the student's windows have none")
    limit = int(teacher.model_max_length)
    if limit < _NO_LIMIT and max_length + int(extra) > limit:
        raise NoBridge(
            f"a window of {max_length} tokens is {max_length + int(extra)} in the teacher's "
            f"layout, more than its {limit} positions"
        )
    bridge = TokenBridge(ids, student.sep_token_id, teacher.sep_token_id, extra, type_ids)
    if type_ids:
        columns, _ = bridge.teacher_columns({k: [v] for k, v in pairs[0].items()})
        if columns["token_type_ids"] != [pairs[1]["token_type_ids"]]:
            raise NoBridge("the two lay out the token type ids of a pair differently")
    return bridge


def describe(bridge: TokenBridge | None) -> str | None:
    """A short tag of the bridge for the teacher-logit cache key (None without one)."""
    if bridge is None:
        return None
    layout = "extra-separator" if bridge.extra_separator else "same-layout"
    digest = hashlib.sha256(np.asarray(bridge.ids, dtype=np.int64).tobytes()).hexdigest()
    return f"{layout}:{digest[:16]}"
