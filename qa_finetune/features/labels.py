"""Answer labels of windows, and the batched ``map`` functions that make training and
evaluation features.

The span alignment is a pure, vectorised function on offsets and sequence ids, so it is
tested without a tokenizer. The feature functions are written for
``datasets.Dataset.map(batched=True)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from qa_finetune.features.windows import Windows, WindowSpec, make_windows


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
        [
            list(map(int, windows.offsets[i, k])) if windows.is_context[i, k] else None
            for k in range(len(ids))
        ]
        for i, ids in enumerate(windows.encoding["input_ids"])
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
