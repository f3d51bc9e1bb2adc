"""Question/context pairs -> overflowing strided windows with answer labels.

The span alignment is a pure, vectorised function on offsets and sequence ids, so it is
tested without a tokenizer. The tokenizer-facing functions are written for
``datasets.Dataset.map(batched=True)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from qa_finetune.errors import QAFinetuneError

# Tokenizers report "no limit" as a huge sentinel (int(1e30)); anything above this is not a cap.
_NO_LIMIT = 1_000_000


class PreprocessError(QAFinetuneError):
    """The window settings cannot hold the questions, or the tokenizer is unsuitable."""


@dataclass(frozen=True)
class WindowSpec:
    """How one tokenizer lays out question/context windows."""

    max_length: int
    stride: int
    question_first: bool  # (question, context) when padding on the right, else reversed

    @property
    def context_sequence_id(self) -> int:
        return 1 if self.question_first else 0

    @property
    def truncation(self) -> str:
        return "only_second" if self.question_first else "only_first"


def window_spec(tokenizer: Any, max_length: int, stride: int) -> WindowSpec:
    """Check the tokenizer and cap ``max_length`` at what the model accepts."""
    if not getattr(tokenizer, "is_fast", False):
        raise PreprocessError(
            f"tokenizer {type(tokenizer).__name__} is not a fast tokenizer; offsets need one "
            "(use a model that ships tokenizer.json)"
        )
    model_max = getattr(tokenizer, "model_max_length", None) or _NO_LIMIT
    if model_max < _NO_LIMIT:
        max_length = min(max_length, int(model_max))
    if stride >= max_length:
        raise PreprocessError(
            f"stride {stride} must be smaller than max_length {max_length}; lower --stride"
        )
    return WindowSpec(max_length, stride, question_first=tokenizer.padding_side == "right")


def check_question_room(tokenizer: Any, questions: Sequence[str], spec: WindowSpec) -> None:
    """Fail clearly when a question leaves no room for ``stride`` context tokens."""
    specials = tokenizer.num_special_tokens_to_add(pair=True)
    lengths = [
        len(ids) for ids in tokenizer(list(questions), add_special_tokens=False)["input_ids"]
    ]
    longest = max(lengths, default=0)
    room = spec.max_length - longest - specials
    if room <= spec.stride:
        raise PreprocessError(
            f"a question of {longest} tokens leaves {room} context tokens per window, not more than "
            f"stride {spec.stride}: raise --max-length to at least {longest + specials + spec.stride + 1} "
            "or lower --stride"
        )


def tokenize_windows(
    tokenizer: Any, questions: Sequence[str], contexts: Sequence[str], spec: WindowSpec
) -> Any:
    """Tokenize into overflowing windows, unpadded; questions are stripped of outer spaces."""
    questions = [q.strip() for q in questions]
    check_question_room(tokenizer, questions, spec)
    first, second = (questions, contexts) if spec.question_first else (contexts, questions)
    return tokenizer(
        list(first),
        list(second),
        truncation=spec.truncation,
        max_length=spec.max_length,
        stride=spec.stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=False,
    )


def _padded(
    rows: Sequence[Sequence[Any]], fill: Any, dtype: Any, tail: tuple[int, ...] = ()
) -> np.ndarray:
    width = max((len(r) for r in rows), default=0)
    array = np.full((len(rows), width, *tail), fill, dtype=dtype)
    for i, row in enumerate(rows):
        if len(row):
            array[i, : len(row)] = row
    return array


def context_mask(encoding: Any, spec: WindowSpec) -> np.ndarray:
    """Boolean [windows, length]: which tokens belong to the context."""
    ids = [
        [-1 if s is None else s for s in encoding.sequence_ids(i)]
        for i in range(len(encoding["input_ids"]))
    ]
    return _padded(ids, -1, np.int8) == spec.context_sequence_id


def cls_indices(input_ids: Sequence[Sequence[int]], cls_token_id: int | None) -> np.ndarray:
    """Position of the CLS token in each window (0 for tokenizers without one)."""
    if cls_token_id is None:
        return np.zeros(len(input_ids), dtype=np.int64)
    return np.array(
        [ids.index(cls_token_id) if cls_token_id in ids else 0 for ids in input_ids], dtype=np.int64
    )


def align_answer_span(
    offsets: np.ndarray,
    is_context: np.ndarray,
    char_start: np.ndarray,
    char_end: np.ndarray,
    cls_index: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Token start/end labels for a batch of windows, vectorised.

    ``offsets`` is [windows, length, 2] (character start/end of each token), ``is_context``
    [windows, length] bool, ``char_start``/``char_end`` [windows] the answer's characters
    (end exclusive; negative start = no answer). A window whose context does not hold the
    whole answer is labelled (CLS, CLS): Keras QA losses have no ignore index, so every
    label must be a valid position.
    """
    char_start = np.asarray(char_start)[:, None]
    char_end = np.asarray(char_end)[:, None]
    token_start, token_end = offsets[..., 0], offsets[..., 1]
    # Zero-width tokens carry no characters and cannot anchor a span.
    real = is_context & (token_end > token_start)
    has_answer = char_start[:, 0] >= 0
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    window_first = np.where(real, token_start, big).min(axis=1)
    window_last = np.where(real, token_end, small).max(axis=1)
    inside = has_answer & (window_first <= char_start[:, 0]) & (window_last >= char_end[:, 0])
    # First context token ending after the answer's start; last one starting before its end.
    starts_ok = real & (token_end > char_start)
    ends_ok = real & (token_start < char_end)
    start_token = starts_ok.argmax(axis=1)
    end_token = ends_ok.shape[1] - 1 - ends_ok[:, ::-1].argmax(axis=1)
    start_positions = np.where(inside, start_token, cls_index).astype(np.int64)
    end_positions = np.where(inside, end_token, cls_index).astype(np.int64)
    return start_positions, end_positions


@dataclass
class Windows:
    """One tokenized batch as arrays: what both train and eval features are built from."""

    encoding: Any
    sample_map: np.ndarray  # [windows] -> example index in the batch
    offsets: np.ndarray  # [windows, length, 2]
    is_context: np.ndarray  # [windows, length] bool
    cls_index: np.ndarray  # [windows]


def make_windows(batch: dict[str, list[Any]], tokenizer: Any, spec: WindowSpec) -> Windows:
    """Tokenize a batch of examples into windows and their array views."""
    encoding = tokenize_windows(tokenizer, batch["question"], batch["context"], spec)
    return Windows(
        encoding=encoding,
        sample_map=np.asarray(encoding["overflow_to_sample_mapping"], dtype=np.int64),
        offsets=_padded(encoding["offset_mapping"], 0, np.int64, (2,)),
        is_context=context_mask(encoding, spec),
        cls_index=cls_indices(encoding["input_ids"], tokenizer.cls_token_id),
    )


def label_windows(
    windows: Windows, answers: Sequence[dict[str, list[Any]]]
) -> tuple[np.ndarray, np.ndarray]:
    """Start/end labels of the first gold answer (SQuAD training data has one) per window."""
    first_start = np.array(
        [a["answer_start"][0] if a["answer_start"] else -1 for a in answers], np.int64
    )
    first_len = np.array([len(a["text"][0]) if a["text"] else 0 for a in answers], np.int64)
    char_start = first_start[windows.sample_map]
    char_end = char_start + first_len[windows.sample_map]
    return align_answer_span(
        windows.offsets, windows.is_context, char_start, char_end, windows.cls_index
    )


def _model_inputs(windows: Windows) -> dict[str, Any]:
    inputs = {
        "input_ids": windows.encoding["input_ids"],
        "attention_mask": windows.encoding["attention_mask"],
    }
    if "token_type_ids" in windows.encoding:
        inputs["token_type_ids"] = windows.encoding["token_type_ids"]
    return inputs


def prepare_train_features(
    batch: dict[str, list[Any]], tokenizer: Any, spec: WindowSpec
) -> dict[str, Any]:
    """Batched ``map`` function: windows with ``start_positions``/``end_positions``.

    Also returns ``label_text`` (the labelled span's context text, "" for CLS) and
    ``gold_texts`` so that ``prepare`` can measure label quality; both are dropped before
    the features are saved.
    """
    windows = make_windows(batch, tokenizer, spec)
    start_positions, end_positions = label_windows(windows, batch["answers"])
    label_text = []
    for i, example in enumerate(windows.sample_map):
        is_cls = (
            start_positions[i] == windows.cls_index[i] and end_positions[i] == windows.cls_index[i]
        )
        span_start = windows.offsets[i, start_positions[i], 0]
        span_end = windows.offsets[i, end_positions[i], 1]
        label_text.append("" if is_cls else batch["context"][example][span_start:span_end])
    return {
        **_model_inputs(windows),
        "start_positions": start_positions.tolist(),
        "end_positions": end_positions.tolist(),
        "example_id": [batch["id"][e] for e in windows.sample_map],
        "label_text": label_text,
        "gold_texts": [batch["answers"][e]["text"] for e in windows.sample_map],
    }


def prepare_eval_features(
    batch: dict[str, list[Any]], tokenizer: Any, spec: WindowSpec
) -> dict[str, Any]:
    """Batched ``map`` function: windows keeping ``example_id`` and context-only offsets.

    When the batch has answers, labels are added too, so the evaluation loss can be computed.
    """
    windows = make_windows(batch, tokenizer, spec)
    offset_mapping = [
        [list(map(int, o)) if windows.is_context[i, k] else None for k, o in enumerate(offsets)]
        for i, offsets in enumerate(windows.encoding["offset_mapping"])
    ]
    features: dict[str, Any] = {
        **_model_inputs(windows),
        "example_id": [batch["id"][s] for s in windows.sample_map],
        "offset_mapping": offset_mapping,
        "cls_index": windows.cls_index.tolist(),
    }
    if "answers" in batch:
        start_positions, end_positions = label_windows(windows, batch["answers"])
        features["start_positions"] = start_positions.tolist()
        features["end_positions"] = end_positions.tolist()
    return features
