"""Windowing and answer alignment: hand-checked cases and properties on random text."""

from __future__ import annotations

import copy
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qa_finetune.features.labels import (
    align_answer_span,
    prepare_eval_features,
    prepare_train_features,
)
from qa_finetune.features.windows import (
    _IS_SPACE,
    PreprocessError,
    non_space_positions,
    window_spec,
)

WORDS = [
    "river",
    "stone",
    "Kestova",
    "1,140",
    "metres",
    "blue-green",
    "the",
    "a",
    "Ostrander's",
    "tower",
    "1973.",
    "(north)",
    "x",
    "über",
    "quartet",
]


@pytest.fixture(scope="module")
def tokenizer(minilm_dir: Any) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(minilm_dir))


def test_align_hand_checked() -> None:
    # Window: [CLS] q [SEP] "ab" "cd" "ef" [SEP]; context chars: ab=0-2, cd=3-5, ef=6-8.
    offsets = np.array([[[0, 0], [0, 1], [0, 0], [0, 2], [3, 5], [6, 8], [0, 0]]])
    is_context = np.array([[False, False, False, True, True, True, False]])
    cls = np.array([0])
    starts, ends = align_answer_span(offsets, is_context, np.array([3]), np.array([8]), cls)
    assert (starts[0], ends[0]) == (4, 5)
    # Answer inside one token's characters: that token alone.
    starts, ends = align_answer_span(offsets, is_context, np.array([4]), np.array([5]), cls)
    assert (starts[0], ends[0]) == (4, 4)
    # Answer past the window's context: CLS.
    starts, ends = align_answer_span(offsets, is_context, np.array([6]), np.array([12]), cls)
    assert (starts[0], ends[0]) == (0, 0)
    # No answer at all (v2): CLS.
    starts, ends = align_answer_span(offsets, is_context, np.array([-1]), np.array([-1]), cls)
    assert (starts[0], ends[0]) == (0, 0)


def test_stride_must_leave_room(tokenizer: Any) -> None:
    with pytest.raises(PreprocessError, match="stride"):
        window_spec(tokenizer, 128, 128)
    assert window_spec(tokenizer, 512, 128).max_length == 512


def test_max_length_above_the_model_maximum_is_an_error(tokenizer: Any) -> None:
    # Capping silently would build other windows than the recipe asks for.
    with pytest.raises(PreprocessError) as error:
        window_spec(tokenizer, 600, 128)
    assert str(error.value) == (
        "max_length 600 is more than the 512 tokens this model takes per window: "
        "set --max-length 512 or less"
    )


def test_slow_tokenizer_is_an_error(minilm_dir: Any) -> None:
    from transformers import BertTokenizer

    slow = BertTokenizer(str(minilm_dir / "vocab.txt"))
    with pytest.raises(PreprocessError, match="is not a fast tokenizer"):
        window_spec(slow, 128, 32)


def test_question_too_long_for_the_window(tokenizer: Any) -> None:
    spec = window_spec(tokenizer, 64, 32)
    batch = {
        "id": ["a"],
        "question": ["why " * 40],
        "context": ["short"],
        "answers": [{"text": ["short"], "answer_start": [0]}],
    }
    with pytest.raises(PreprocessError, match="raise --max-length to at least"):
        prepare_train_features(batch, tokenizer, spec)


def test_eval_features_keep_ids_and_null_non_context_offsets(tokenizer: Any) -> None:
    spec = window_spec(tokenizer, 32, 8)
    context = " ".join(WORDS * 4)
    batch = {
        "id": ["e1"],
        "question": ["  Where is the tower?"],
        "context": [context],
        "answers": [{"text": ["tower"], "answer_start": [context.index("tower")]}],
    }
    features = prepare_eval_features(batch, tokenizer, spec)
    assert len(features["input_ids"]) > 1 and set(features["example_id"]) == {"e1"}
    for ids, offsets, cls in zip(
        features["input_ids"], features["offset_mapping"], features["cls_index"], strict=True
    ):
        assert offsets[cls] is None and offsets[0] is None and offsets[-1] is None
        assert any(o is not None for o in offsets)
        assert ids[cls] == tokenizer.cls_token_id
    assert "start_positions" in features


@st.composite
def examples(draw: Any) -> dict[str, Any]:
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=120))
    context = " ".join(words)
    first = draw(st.integers(0, len(words) - 1))
    last = draw(st.integers(first, min(len(words) - 1, first + 6)))
    start = len(" ".join(words[:first])) + (1 if first else 0)
    text = " ".join(words[first : last + 1])
    max_length = draw(st.integers(24, 96))
    stride = draw(st.integers(0, max_length - 20))
    return {
        "context": context,
        "text": text,
        "start": start,
        "max_length": max_length,
        "stride": stride,
    }


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(example=examples(), left=st.booleans())
def test_labels_cover_the_answer_and_windows_cover_the_context(
    tokenizer: Any, example: dict[str, Any], left: bool
) -> None:
    tok = copy.copy(tokenizer)
    tok.padding_side = "left" if left else "right"  # left-padding models put the context first
    spec = window_spec(tok, example["max_length"], example["stride"])
    context, start = example["context"], example["start"]
    end = start + len(example["text"])
    assert context[start:end] == example["text"]
    batch = {
        "id": ["x"],
        "question": ["What is it?"],
        "context": [context],
        "answers": [{"text": [example["text"]], "answer_start": [start]}],
    }
    features = prepare_train_features(batch, tok, spec)
    encoding = tok(
        *(["What is it?"], [context]) if not left else ([context], ["What is it?"]),
        truncation=spec.truncation,
        max_length=spec.max_length,
        stride=spec.stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    covered: set[tuple[int, int]] = set()
    for i, (s, e) in enumerate(
        zip(features["start_positions"], features["end_positions"], strict=True)
    ):
        seq = encoding.sequence_ids(i)
        offsets = encoding["offset_mapping"][i]
        context_tokens = [k for k, sid in enumerate(seq) if sid == spec.context_sequence_id]
        covered |= {tuple(offsets[k]) for k in context_tokens}
        window_start = offsets[context_tokens[0]][0]
        window_end = offsets[context_tokens[-1]][1]
        holds_answer = window_start <= start and window_end >= end
        cls = encoding["input_ids"][i].index(tok.cls_token_id)
        if not holds_answer:
            assert (s, e) == (cls, cls)
            continue
        assert s in context_tokens and e in context_tokens and s <= e
        assert offsets[s][0] <= start and offsets[e][1] >= end  # covers the answer
        assert offsets[s][1] > start and offsets[e][0] < end  # only tokens touching it
        assert features["label_text"][i].strip()
    full = tok(
        *(["What is it?"], [context]) if not left else ([context], ["What is it?"]),
        return_offsets_mapping=True,
    )
    full_seq = full.sequence_ids(0)
    expected = {
        tuple(o)
        for o, sid in zip(full["offset_mapping"][0], full_seq, strict=True)
        if sid == spec.context_sequence_id
    }
    assert covered == expected  # no context token is lost between windows


@pytest.mark.parametrize("left", [False, True])
def test_windows_equal_the_tokenizers_own_pair_call(tokenizer: Any, left: bool) -> None:
    from qa_finetune.features.windows import make_windows

    tok = copy.copy(tokenizer)
    tok.padding_side = "left" if left else "right"
    spec = window_spec(tok, 40, 10)
    long_context = " ".join(WORDS * 9)
    contexts = [long_context, "Kestova tower", long_context, long_context]
    questions = ["Where?", " What is the tower? ", "Who?", "How many metres high"]
    batch = {"id": list("abcd"), "question": questions, "context": contexts}
    windows = make_windows(batch, tok, spec)
    stripped = [q.strip() for q in questions]
    pair = (stripped, contexts) if not left else (contexts, stripped)
    expected = tok(
        *pair,
        truncation=spec.truncation,
        max_length=40,
        stride=10,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    assert windows.encoding["input_ids"] == expected["input_ids"]
    assert windows.encoding["token_type_ids"] == expected["token_type_ids"]
    assert [list(map(tuple, o)) for o in windows.encoding["offset_mapping"]] == [
        list(map(tuple, o)) for o in expected["offset_mapping"]
    ]
    assert windows.sample_map.tolist() == expected["overflow_to_sample_mapping"]
    for i in range(len(expected["input_ids"])):
        context_id = spec.context_sequence_id
        mask = [sid == context_id for sid in expected.sequence_ids(i)]
        assert windows.is_context[i, : len(mask)].tolist() == mask


def test_no_character_past_the_whitespace_table_is_whitespace() -> None:
    # non_space_positions treats every code point past its table as not whitespace.
    assert not any(chr(code).isspace() for code in range(len(_IS_SPACE), sys.maxunicode + 1))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "plain words",
        "".join(chr(code) for code in range(0x3002) if chr(code).isspace()) + "x",
        "a\u00a0b\u2009c\u3000d\u2028e\u0085f\tg\nh",
        "emoji \U0001f600 and a lone \ud800 surrogate",
        "\x1c\x1d\x1e\x1f end",
    ],
)
def test_non_space_positions_match_str_isspace(text: str) -> None:
    expected = [i for i, ch in enumerate(text) if not ch.isspace()]
    assert non_space_positions(text).tolist() == expected


@given(st.text())
def test_non_space_positions_match_str_isspace_on_any_text(text: str) -> None:
    expected = [i for i, ch in enumerate(text) if not ch.isspace()]
    assert non_space_positions(text).tolist() == expected
