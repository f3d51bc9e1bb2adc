"""Answer-span search over strided windows: hand-worked cases and a double-loop reference."""

from __future__ import annotations

import math
import subprocess
import sys
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from qa_finetune.decoding import span_search
from qa_finetune.decoding.spans import (
    Span,
    best_spans,
    null_score,
    offsets_to_array,
    postprocess_predictions,
)

CONTEXT = "The cat sat on the mat."
# Token offsets of CONTEXT; a window is [CLS] question... [SEP] context [SEP] with None outside.
TOKENS = [(0, 3), (4, 7), (8, 11), (12, 14), (15, 18), (19, 22), (22, 23)]


def window(tokens: list[tuple[int, int]], question: int = 2, length: int = 12) -> list:
    """Offsets of one window: CLS + question tokens + SEP as None, then tokens, SEP, padding."""
    offsets: list = [None] * (question + 2) + list(tokens) + [None]
    return offsets + [None] * (length - len(offsets))


def logits(length: int, values: dict[int, float]) -> np.ndarray:
    row = np.zeros(length, dtype=np.float32)
    for position, value in values.items():
        row[position] = value
    return row


# --- offsets_to_array -------------------------------------------------------------------------


def test_offsets_to_array_marks_none_and_padding() -> None:
    array = offsets_to_array([[None, (0, 3), [4, 7]], [None, (1, 2)]])
    assert array.dtype == np.int64
    assert array.shape == (2, 3, 2)
    assert array.tolist() == [
        [[-1, -1], [0, 3], [4, 7]],
        [[-1, -1], [1, 2], [-1, -1]],  # the second feature is padded with -1
    ]


def test_offsets_to_array_length_and_errors() -> None:
    assert offsets_to_array([[(0, 1)], []], length=4).shape == (2, 4, 2)
    assert offsets_to_array([]).shape == (0, 0, 2)
    with pytest.raises(ValueError, match="more than width=1"):
        offsets_to_array([[(0, 1), (1, 2)]], length=1)


# --- best_spans ---------------------------------------------------------------------------------


def test_best_spans_hand_worked() -> None:
    offsets = offsets_to_array([window(TOKENS)])  # context tokens at positions 4..10
    # Starts: "cat" (5) 3.0, "The" (4) 1.0. Ends: "cat" (5) 2.0, "mat" (9) 1.5. CLS 9 + 9.
    start = logits(12, {0: 9.0, 4: 1.0, 5: 3.0})
    end = logits(12, {0: 9.0, 5: 2.0, 9: 1.5})
    spans = best_spans(CONTEXT, start[None], end[None], offsets, n_best=2)
    # With n_best 2: starts {5, 4}, ends {5, 9}; pairs: cat=3+2=5, cat..mat=3+1.5=4.5,
    # The cat=1+2=3, The..mat=1+1.5=2.5; the best two are returned.
    assert [(s.text, s.start, s.end, s.score) for s in spans] == [
        ("cat", 4, 7, 5.0),
        ("cat sat on the mat", 4, 22, 4.5),
    ]
    # Softmax over the two: 1 / (1 + e^-0.5) = 0.6225, e^-0.5 / (1 + e^-0.5) = 0.3775
    assert spans[0].probability == pytest.approx(1 / (1 + math.exp(-0.5)))
    assert spans[1].probability == pytest.approx(math.exp(-0.5) / (1 + math.exp(-0.5)))
    assert isinstance(spans[0], Span)


def test_best_spans_never_picks_end_before_start_or_non_context() -> None:
    offsets = offsets_to_array([window(TOKENS)])
    # The highest start is the question token 2 and the best end precedes the best start.
    start = logits(12, {2: 50.0, 8: 5.0})  # "the" (15, 18)
    end = logits(12, {3: 50.0, 4: 5.0, 10: 1.0})  # "The", "."
    spans = best_spans(CONTEXT, start, end, offsets, n_best=3)
    # Valid: start 8 with ends 8.. -> "the mat." = 5 + 1 = 6 is best (4 is before 8).
    assert spans[0].text == "the mat."
    assert spans[0].score == 6.0
    assert all(s.start < s.end for s in spans)


def test_answer_from_last_of_many_windows() -> None:
    context = " ".join(f"w{i}" for i in range(40))  # tokens "w0".."w39"
    starts_at = [context.index(f"w{i}") for i in range(40)]
    tokens = [(s, s + len(f"w{i}")) for i, s in enumerate(starts_at)]
    windows = [tokens[i : i + 10] for i in range(0, 40, 6)]  # 7 overlapping windows of <= 10
    offsets = offsets_to_array([window(w, length=16) for w in windows])
    rng = np.random.default_rng(0)
    start = rng.normal(0, 0.1, (len(windows), 16)).astype(np.float32)
    end = rng.normal(0, 0.1, (len(windows), 16)).astype(np.float32)
    # In the last window (tokens w36..w39 at positions 4..7), "w37 w38" stands out.
    start[-1, 5], end[-1, 6] = 8.0, 8.0
    best = best_spans(context, start, end, offsets)[0]
    assert best.text == "w37 w38"
    assert best.text == context[best.start : best.end]


def test_cross_window_dedupe_keeps_higher_score() -> None:
    # Two windows both holding "sat on" (tokens 2..3): scores 4 in the first, 7 in the second.
    offsets = offsets_to_array([window(TOKENS[:5]), window(TOKENS[2:])])
    start = np.stack([logits(12, {6: 2.0}), logits(12, {4: 3.5})])
    end = np.stack([logits(12, {7: 2.0}), logits(12, {5: 3.5})])
    spans = best_spans(CONTEXT, start, end, offsets)
    texts = [s.text for s in spans]
    assert texts.count("sat on") == 1
    assert spans[0].text == "sat on"
    assert spans[0].score == 7.0
    assert len({(s.start, s.end) for s in spans}) == len(spans)


def test_max_answer_length_in_tokens() -> None:
    offsets = offsets_to_array([window(TOKENS)])
    start = logits(12, {4: 5.0, 7: 1.0})  # "The", "on"
    end = logits(12, {9: 5.0, 8: 0.5})  # "mat", "the"
    # "The cat sat on the mat" is 6 tokens (4..9).
    assert best_spans(CONTEXT, start, end, offsets, max_answer_length=6)[0].text == (
        "The cat sat on the mat"
    )
    spans = best_spans(CONTEXT, start, end, offsets, max_answer_length=3)
    # The longest allowed: 3 tokens. Best now "on the mat" = 1 + 5 = 6.
    assert spans[0].text == "on the mat"
    assert all(len(s.text.split()) <= 3 for s in spans)
    assert best_spans(CONTEXT, start, end, offsets, max_answer_length=1)[0].text in {
        "The",
        "mat",
    }


def test_tokens_sharing_a_character_offset() -> None:
    # Byte-level vocabularies give several tokens the same offsets (the bytes of one
    # character). Here two tokens both cover "ab" (0, 2), then "cd" (3, 5).
    offsets = offsets_to_array([[None, (0, 2), (0, 2), (3, 5)]])
    start = np.array([0.0, 5.0, 4.0, 0.0])
    end = np.array([0.0, 0.0, 5.0, 1.0])
    # n_best 2: starts {1, 2}, ends {2, 3}. Pairs: 1-2 "ab" 10, 2-2 "ab" 9 (the same span),
    # 1-3 "ab cd" 6, 2-3 "ab cd" 5. Distinct spans: "ab" 10, "ab cd" 6 -- the two best pairs
    # are one span, so the second span must not be cut for ranking below them.
    spans = best_spans("ab cd", start, end, offsets, n_best=2)
    assert [(s.text, s.score) for s in spans] == [("ab", 10.0), ("ab cd", 6.0)]


def test_zero_width_tokens_neither_start_nor_end_a_span() -> None:
    # "green.   " as byte-level BPE cuts it: "green" (0, 5), "." (5, 6), then lone spaces
    # trimmed to zero width after their character. Their high end logits must not pull
    # the trailing spaces into the answer.
    offsets = offsets_to_array([[None, (0, 5), (5, 6), (7, 7), (8, 8), (9, 9), None]])
    start = np.array([0.0, 5.0, 0.0, 9.0, 9.0, 9.0, 0.0])
    end = np.array([0.0, 1.0, 2.0, 9.0, 9.0, 9.0, 0.0])
    spans = best_spans("green.   ", start, end, offsets, n_best=5)
    assert [(s.text, s.start, s.end) for s in spans] == [
        ("green.", 0, 6),
        ("green", 0, 5),
        (".", 5, 6),
    ]


def test_no_valid_span_gives_empty_list() -> None:
    offsets = offsets_to_array([[None, None, None]])
    assert best_spans("abc", np.zeros(3), np.zeros(3), offsets) == []
    # Only a zero-width context token: no span covers a character.
    assert best_spans("abc", np.zeros(2), np.zeros(2), np.array([[-1, -1], [1, 1]])) == []


def test_float16_logits_and_substring_property() -> None:
    offsets = offsets_to_array([window(TOKENS), window(TOKENS[3:])])
    rng = np.random.default_rng(1)
    start = rng.normal(size=(2, 12)).astype(np.float16)
    end = rng.normal(size=(2, 12)).astype(np.float16)
    spans = best_spans(CONTEXT, start, end, offsets, n_best=5)
    assert spans
    for span in spans:
        assert span.text == CONTEXT[span.start : span.end]
        assert isinstance(span.score, float)
    # Scores are float16 values summed exactly in float64.
    assert spans == best_spans(CONTEXT, start.astype(np.float64), end, offsets, n_best=5)
    assert sum(s.probability for s in spans) == pytest.approx(1.0)
    assert [s.score for s in spans] == sorted((s.score for s in spans), reverse=True)


def test_shape_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="shapes do not match"):
        best_spans("abc", np.zeros((1, 3)), np.zeros((1, 4)), np.zeros((1, 3, 2)))


# --- null score and postprocess_predictions ------------------------------------------------------


def test_null_score_is_minimum_over_windows() -> None:
    start = np.array([[3.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    end = np.array([[2.0, 0.0, 0.0], [0.0, 0.5, 0.0]])
    # Window 0: cls 0 -> 3 + 2 = 5; window 1: cls 1 -> 1 + 0.5 = 1.5; minimum 1.5
    assert null_score(start, end, np.array([0, 1])) == 1.5


def _two_examples() -> tuple[list, list, list, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    contexts = [CONTEXT, "Paris is in France."]
    paris = [(0, 5), (6, 8), (9, 11), (12, 18), (18, 19)]
    # Features interleaved on purpose: grouping must not rely on order.
    feature_ids = ["b", "a", "b"]
    offsets = offsets_to_array([window(paris[:3]), window(TOKENS), window(paris[2:])])
    start = np.stack([logits(12, {0: 1.0, 4: 4.0}), logits(12, {0: 6.0, 5: 2.0}), logits(12, {})])
    end = np.stack([logits(12, {0: 1.0, 4: 4.0}), logits(12, {0: 6.0, 5: 2.0}), logits(12, {})])
    cls_index = np.zeros(3, dtype=np.int64)
    return ["a", "b"], contexts, feature_ids, start, end, offsets, cls_index


def test_postprocess_predictions_v1() -> None:
    example_ids, contexts, feature_ids, start, end, offsets, _ = _two_examples()
    out = postprocess_predictions(example_ids, contexts, feature_ids, start, end, offsets)
    # a: "cat" = 2 + 2 = 4; b: "Paris" = 4 + 4 = 8 (first feature)
    assert out.answers == {"a": "cat", "b": "Paris"}
    assert out.nbest["a"][0] == {
        "text": "cat",
        "start": 4,
        "end": 7,
        "score": 4.0,
        "probability": out.nbest["a"][0]["probability"],
    }
    assert out.null_score_diff == {}
    assert list(out.answers) == ["a", "b"]


def test_postprocess_predictions_v2_null() -> None:
    example_ids, contexts, feature_ids, start, end, offsets, cls_index = _two_examples()
    score = partial(
        postprocess_predictions,
        example_ids,
        contexts,
        feature_ids,
        start,
        end,
        offsets,
        cls_index=cls_index,
        allow_no_answer=True,
    )
    out = score()
    # a: null 6 + 6 = 12, best 4: diff 8 > 0 -> "".
    # b: null = min(1 + 1, 0 + 0) = 0 (second window), best 8: diff -8 -> "Paris".
    assert out.answers == {"a": "", "b": "Paris"}
    assert out.null_score_diff == {"a": 8.0, "b": -8.0}
    assert out.nbest["a"][0]["text"] == "cat"  # the n-best list keeps the spans
    # A threshold above 8 lets "cat" through.
    out = score(no_answer_threshold=8.5)
    assert out.answers == {"a": "cat", "b": "Paris"}


def test_postprocess_predictions_without_span_or_features() -> None:
    offsets = offsets_to_array([[None, None]])
    zeros = np.zeros((1, 2))
    for v2 in (False, True):
        out = postprocess_predictions(
            ["x", "y"],
            ["ctx", "other"],
            ["x"],
            zeros,
            zeros,
            offsets,
            cls_index=np.zeros(1, dtype=np.int64),
            allow_no_answer=v2,
        )
        assert out.answers == {"x": "", "y": ""}
        assert out.nbest == {"x": [], "y": []}
        # x has no valid span: infinitely more likely unanswerable; y has no feature at all.
        assert out.null_score_diff == {"x": math.inf}


def test_postprocess_predictions_rejects_bad_input() -> None:
    offsets = offsets_to_array([[None, (0, 1)]])
    zeros = np.zeros((1, 2))
    with pytest.raises(ValueError, match="unknown example id 'z'"):
        postprocess_predictions(["x"], ["a"], ["z"], zeros, zeros, offsets)
    with pytest.raises(ValueError, match="needs cls_index"):
        postprocess_predictions(["x"], ["a"], ["x"], zeros, zeros, offsets, allow_no_answer=True)


# --- property: the vectorised search equals a plain double loop ---------------------------------


def reference_spans(
    context: str,
    start: np.ndarray,
    end: np.ndarray,
    offsets: np.ndarray,
    n_best: int,
    max_answer_length: int,
) -> list[tuple[str, int, int, float]]:
    """Top-n context starts x top-n context ends per window, one loop per pair."""
    found: dict[tuple[int, int], float] = {}
    for w in range(start.shape[0]):
        # Context tokens that carry at least one character.
        context_positions = [
            i
            for i in range(start.shape[1])
            if offsets[w, i, 0] >= 0 and offsets[w, i, 1] > offsets[w, i, 0]
        ]
        # Equal logits: the lower position first.
        top_starts = sorted(context_positions, key=lambda i: (-float(start[w, i]), i))[:n_best]
        top_ends = sorted(context_positions, key=lambda i: (-float(end[w, i]), i))[:n_best]
        for s in top_starts:
            for e in top_ends:
                if e < s or e - s + 1 > max_answer_length:
                    continue
                char_start, char_end = int(offsets[w, s, 0]), int(offsets[w, e, 1])
                if char_end <= char_start:
                    continue
                score = float(start[w, s]) + float(end[w, e])
                if score > found.get((char_start, char_end), -math.inf):
                    found[(char_start, char_end)] = score
    ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))[:n_best]
    return [(context[cs:ce], cs, ce, score) for (cs, ce), score in ranked]


@st.composite
def examples(draw: st.DrawFn) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """A context, its tokens (some zero-width), and overlapping padded windows over them."""
    widths = draw(st.lists(st.integers(0, 4), min_size=1, max_size=20))
    gaps = draw(st.lists(st.integers(0, 1), min_size=len(widths), max_size=len(widths)))
    tokens, position = [], 0
    for width, gap in zip(widths, gaps, strict=True):
        position += gap
        tokens.append((position, position + width))
        position += width
    context = "".join(chr(ord("a") + i % 26) for i in range(position))
    windows = []
    for _ in range(draw(st.integers(1, 4))):
        first = draw(st.integers(0, len(tokens) - 1))
        count = draw(st.integers(1, len(tokens) - first))
        question = draw(st.integers(0, 3))
        windows.append([None] * question + tokens[first : first + count])
    offsets = offsets_to_array(
        windows, length=max(len(w) for w in windows) + draw(st.integers(0, 2))
    )
    dtype = draw(st.sampled_from([np.float16, np.float32, np.float64]))
    width = np.dtype(dtype).itemsize * 8
    # Few distinct values make ties common, which is where implementations tend to differ;
    # magnitudes far apart test that scores are summed without rounding.
    elements = st.one_of(
        st.sampled_from([-1.0, -0.0, 0.0, 0.5, 1.0]),
        st.floats(-8, 8, width=16),
        st.floats(-1024, 1024, width=width),
        st.floats(-(2.0**-14), 2.0**-14, width=width),
    )
    start = draw(hnp.arrays(dtype, offsets.shape[:2], elements=elements))
    end = draw(hnp.arrays(dtype, offsets.shape[:2], elements=elements))
    return context, start, end, offsets


@settings(max_examples=150, deadline=None)
@given(examples(), st.integers(1, 6), st.integers(1, 8))
def test_best_spans_matches_double_loop(
    example: tuple[str, np.ndarray, np.ndarray, np.ndarray], n_best: int, max_answer_length: int
) -> None:
    context, start, end, offsets = example
    got = best_spans(context, start, end, offsets, n_best, max_answer_length)
    expected = reference_spans(context, start, end, offsets, n_best, max_answer_length)
    assert [(s.text, s.start, s.end, s.score) for s in got] == expected
    if got:
        assert got[0].text == expected[0][0]
        assert sum(s.probability for s in got) == pytest.approx(1.0)


@settings(max_examples=50, deadline=None)
@given(st.lists(examples(), min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_batch_matches_per_example(
    batch: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]], random: object
) -> None:
    # Pad every example's windows to one length and shuffle the features of all examples.
    length = max(offsets.shape[1] for _, _, _, offsets in batch)
    rows = []
    for index, (_, start, end, offsets) in enumerate(batch):
        pad = length - offsets.shape[1]
        for w in range(start.shape[0]):
            rows.append(
                (
                    str(index),
                    np.pad(start[w].astype(np.float64), (0, pad)),
                    np.pad(end[w].astype(np.float64), (0, pad)),
                    np.pad(offsets[w], ((0, pad), (0, 0)), constant_values=-1),
                )
            )
    random.shuffle(rows)  # type: ignore[attr-defined]
    out = postprocess_predictions(
        [str(i) for i in range(len(batch))],
        [context for context, _, _, _ in batch],
        [row[0] for row in rows],
        np.stack([row[1] for row in rows]),
        np.stack([row[2] for row in rows]),
        np.stack([row[3] for row in rows]),
        n_best=4,
        max_answer_length=5,
    )
    for index, (context, start, end, offsets) in enumerate(batch):
        expected = reference_spans(context, start, end, offsets, 4, 5)
        got = out.nbest[str(index)]
        assert [(d["text"], d["start"], d["end"], d["score"]) for d in got] == expected
        assert out.answers[str(index)] == (expected[0][0] if expected else "")


def test_block_and_fallback_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    # Many windows of several examples: the result must not depend on the block size, nor on
    # whether the sorts use packed keys or the lexsort fallback.
    rng = np.random.default_rng(3)
    contexts = ["".join(rng.choice(list("abc "), size=60)) for _ in range(5)]
    feature_ids, rows = [], []
    for _ in range(40):
        example = int(rng.integers(5))
        first = int(rng.integers(0, 50))
        tokens = [(c, c + int(rng.integers(0, 3))) for c in range(first, min(first + 12, 58), 2)]
        feature_ids.append(str(example))
        rows.append([None] * int(rng.integers(0, 3)) + tokens)
    offsets = offsets_to_array(rows, length=16)
    # Rounded logits: ties within and across windows.
    start = np.round(rng.normal(size=offsets.shape[:2]), 1).astype(np.float32)
    end = np.round(rng.normal(size=offsets.shape[:2]), 1).astype(np.float32)
    ids = [str(i) for i in range(5)]

    def run() -> dict[str, list[dict]]:
        return postprocess_predictions(
            ids, contexts, feature_ids, start, end, offsets, n_best=5, max_answer_length=4
        ).nbest

    expected = run()
    monkeypatch.setattr(span_search, "WINDOWS_PER_BLOCK", 3)
    assert run() == expected
    monkeypatch.setattr(span_search, "pack_keys", lambda *keys: None)
    assert run() == expected
    for i in ids:
        mine = [j for j, f in enumerate(feature_ids) if f == i]
        reference = reference_spans(
            contexts[int(i)], start[mine], end[mine], offsets[mine], n_best=5, max_answer_length=4
        )
        assert [(d["text"], d["start"], d["end"], d["score"]) for d in expected[i]] == reference


def test_import_keeps_tensorflow_out() -> None:
    code = (
        "import sys, qa_finetune.decoding.spans, qa_finetune.metrics; "
        "bad = [m for m in ('tensorflow', 'transformers', 'torch') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
