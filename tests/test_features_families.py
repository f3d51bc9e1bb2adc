"""Windows, labels and answers for each tokenizer family: WordPiece (BERT/MiniLM), byte-level
BPE (RoBERTa), WordPiece without type ids (DistilBERT) and left-padding Unigram (XLNet).

Every window is checked against the tokenizer's own pair call, and every label against the
gold answer text, with contexts that hold the whitespace and characters that trip offsets.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from families import FAMILIES
from sample_files import sample_data_path

from qa_finetune.features.labels import prepare_eval_features, prepare_train_features
from qa_finetune.features.windows import make_windows, window_spec

# Leading/trailing spaces, doubled spaces, newlines, tabs, accents, a dash, CJK and emoji.
ODD_CONTEXTS = [
    "  The Denver Broncos  defeated\tthe Carolina Panthers 24–10 to earn their third "
    "Super Bowl title.\n\nThe game was played at Levi's Stadium in Santa Clara, café "
    "Ñandú 😀 on February 7, 2016. ",
    "\tKestova tower (north) was built in 1973 by Ostrander's firm; it is 1,140 metres "
    "high.\r\nÜber 東京 the river 🚀🚀 runs blue-green.   ",
    "Plain text with one answer at the very end: Alma Stroud",
]
ANSWERS = ["Denver Broncos", "Levi's Stadium", "February 7, 2016", "1973", "東京", "Alma Stroud"]
QUESTIONS = ["Who won?", "  Where was the game played? ", "When\twas it?", "¿Qué año?"]


def _odd_batch() -> dict[str, list[Any]]:
    """Each odd context repeated (so windows overflow) with every question and an answer."""
    ids, questions, contexts, answers = [], [], [], []
    for c, base in enumerate(ODD_CONTEXTS):
        context = base * 4
        for q, question in enumerate(QUESTIONS):
            found = [a for a in ANSWERS if a in base]
            text = found[q % len(found)]
            # Later copies too, so some answers sit deep in the context.
            start = [i for i in range(len(context)) if context.startswith(text, i)][q % 4 // 2]
            ids.append(f"{c}-{q}")
            questions.append(question)
            contexts.append(context)
            answers.append({"text": [text], "answer_start": [start]})
    return {"id": ids, "question": questions, "context": contexts, "answers": answers}


def _pair_call(tokenizer: Any, spec: Any, questions: list[str], contexts: list[str]) -> Any:
    stripped = [q.strip() for q in questions]
    pair = (stripped, contexts) if spec.question_first else (contexts, stripped)
    return tokenizer(
        *pair,
        truncation=spec.truncation,
        max_length=spec.max_length,
        stride=spec.stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )


def _trimmed(context: str, start: int, end: int) -> tuple[int, int]:
    """A token's characters without edge whitespace (an independent, per-token version)."""
    while start < end and context[start].isspace():
        start += 1
    while end > start and context[end - 1].isspace():
        end -= 1
    return start, end


def test_families_have_their_layouts(family_tokenizer: Any) -> None:
    # The families differ where windowing can go wrong: CLS position, type ids, padding side.
    roberta, distilbert, xlnet = (family_tokenizer(f) for f in ("roberta", "distilbert", "xlnet"))
    assert type(roberta).__name__ == "RobertaTokenizerFast" and roberta.cls_token == "<s>"
    assert "token_type_ids" not in roberta.model_input_names
    assert roberta("a", "b")["input_ids"].count(roberta.sep_token_id) == 3  # </s></s> between
    assert "token_type_ids" not in distilbert.model_input_names
    assert xlnet.padding_side == "left"
    ids = xlnet("a", "b")["input_ids"]
    assert ids[-1] == xlnet.cls_token_id and "token_type_ids" in xlnet.model_input_names


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("max_length", "stride"), [(48, 8), (64, 16), (128, 40), (400, 100)])
def test_windows_equal_the_pair_call(
    family_tokenizer: Any, family: str, max_length: int, stride: int
) -> None:
    tokenizer = family_tokenizer(family)
    spec = window_spec(tokenizer, max_length, stride)
    batch = _odd_batch()
    windows = make_windows(batch, tokenizer, spec)
    expected = _pair_call(tokenizer, spec, batch["question"], batch["context"])
    assert windows.encoding["input_ids"] == expected["input_ids"]
    assert windows.encoding["attention_mask"] == expected["attention_mask"]
    if "token_type_ids" in tokenizer.model_input_names:
        assert windows.encoding["token_type_ids"] == expected["token_type_ids"]
    else:
        assert "token_type_ids" not in windows.encoding
    assert [list(map(tuple, o)) for o in windows.encoding["offset_mapping"]] == [
        list(map(tuple, o)) for o in expected["offset_mapping"]
    ]
    assert windows.sample_map.tolist() == expected["overflow_to_sample_mapping"]
    if max_length < 400:
        assert len(expected["input_ids"]) > len(batch["id"])  # the contexts did overflow
    for i, ids in enumerate(expected["input_ids"]):
        context = batch["context"][windows.sample_map[i]]
        mask = [sid == spec.context_sequence_id for sid in expected.sequence_ids(i)]
        assert windows.is_context[i, : len(mask)].tolist() == mask
        assert ids[windows.cls_index[i]] == tokenizer.cls_token_id
        # Labels and answers use each context token's characters without edge whitespace.
        trimmed = [
            _trimmed(context, *o) if m else tuple(o)
            for o, m in zip(expected["offset_mapping"][i], mask, strict=True)
        ]
        assert list(map(tuple, windows.offsets[i, : len(ids)].tolist())) == trimmed
    if family == "xlnet":
        assert all(
            c == len(ids) - 1
            for c, ids in zip(windows.cls_index, expected["input_ids"], strict=True)
        )


@pytest.mark.parametrize("family", FAMILIES)
def test_eval_features_are_the_windows_with_context_offsets_only(
    family_tokenizer: Any, family: str
) -> None:
    tokenizer = family_tokenizer(family)
    spec = window_spec(tokenizer, 64, 16)
    batch = _odd_batch()
    windows = make_windows(batch, tokenizer, spec)
    features = prepare_eval_features(batch, tokenizer, spec)
    assert features["input_ids"] == windows.encoding["input_ids"]
    assert features["cls_index"] == windows.cls_index.tolist()
    for i, offsets in enumerate(features["offset_mapping"]):
        for k, pair in enumerate(offsets):
            if windows.is_context[i, k]:
                assert pair == windows.offsets[i, k].tolist()
            else:
                assert pair is None


def _classic_labels(
    encoding: Any, i: int, context_id: int, start: int, end: int
) -> tuple[int, int] | None:
    """The run_qa rule on the pair call's own offsets (None: the answer is not in window i),
    an independent reference for the labels."""
    sequence_ids = encoding.sequence_ids(i)
    offsets = encoding["offset_mapping"][i]
    context = [k for k, s in enumerate(sequence_ids) if s == context_id]
    first, last = context[0], context[-1]
    if not (offsets[first][0] <= start and offsets[last][1] >= end):
        return None
    token_start = first
    while token_start <= last and offsets[token_start][0] <= start:
        token_start += 1
    token_end = last
    while token_end >= first and offsets[token_end][1] >= end:
        token_end -= 1
    return token_start - 1, token_end + 1


def _sample_batch() -> dict[str, list[Any]]:
    data = json.loads(sample_data_path("train").read_text(encoding="utf-8"))
    rows: dict[str, list[Any]] = {"id": [], "question": [], "context": [], "answers": []}
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                rows["id"].append(qa["id"])
                rows["question"].append(qa["question"])
                rows["context"].append(paragraph["context"])
                first = qa["answers"][0]
                rows["answers"].append(
                    {"text": [first["text"]], "answer_start": [first["answer_start"]]}
                )
    odd = _odd_batch()
    return {key: rows[key] + odd[key] for key in rows}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("max_length", "stride"), [(64, 16), (384, 128)])
def test_labels_point_at_the_gold_text(
    family_tokenizer: Any, family: str, max_length: int, stride: int
) -> None:
    tokenizer = family_tokenizer(family)
    spec = window_spec(tokenizer, max_length, stride)
    batch = _sample_batch()
    features = prepare_train_features(batch, tokenizer, spec)
    windows = make_windows(batch, tokenizer, spec)
    encoding = _pair_call(tokenizer, spec, batch["question"], batch["context"])
    inside_tokens, labelled = [], 0
    for i, (s, e) in enumerate(
        zip(features["start_positions"], features["end_positions"], strict=True)
    ):
        example = windows.sample_map[i]
        answer = batch["answers"][example]
        start = answer["answer_start"][0]
        end = start + len(answer["text"][0])
        ids = features["input_ids"][i]
        classic = _classic_labels(encoding, i, spec.context_sequence_id, start, end)
        if classic is None:  # the answer is not wholly in this window: the CLS position
            cls = ids.index(tokenizer.cls_token_id)
            assert (s, e) == (cls, cls) and features["label_text"][i] == ""
            if family == "xlnet":
                assert cls == len(ids) - 1
            continue
        labelled += 1
        # The same characters; byte-level BPE splits one character into several tokens with
        # equal offsets, of which the run_qa rule takes the last at the start and the first
        # at the end, and preprocess the first and the last.
        offsets = encoding["offset_mapping"][i]
        assert (offsets[s][0], offsets[e][1]) == (offsets[classic[0]][0], offsets[classic[1]][1])
        assert (s, e) == classic or family == "roberta"
        text = features["label_text"][i]
        if text != answer["text"][0]:
            # Only when a token reaches past the answer ("1973." for "1973").
            assert answer["text"][0] in text, (family, text, answer["text"][0])
            inside_tokens.append((answer["text"][0], text))
    assert labelled > len(batch["id"]) // 2
    # A handful at most, all the answer with a neighbouring character glued on.
    assert len(inside_tokens) <= max(2, labelled // 50), inside_tokens


def test_labels_after_padding_point_at_the_same_tokens(family_tokenizer: Any) -> None:
    """Batches are padded after the window even for left-padding tokenizers (XLNet), so the
    start/end labels, positions in the unpadded window, still point at the answer."""
    from datasets import Dataset

    from qa_finetune.training.tf_data import make_dataset

    tokenizer = family_tokenizer("xlnet")
    batch = _odd_batch()
    features = prepare_train_features(batch, tokenizer, window_spec(tokenizer, 64, 16))
    features.pop("label_text"), features.pop("gold_texts")
    dataset = make_dataset(Dataset.from_dict(features), tokenizer, 8, seed=None, bucketing=False)
    row = 0
    for inputs in dataset.as_numpy_iterator():
        labels = inputs
        for k in range(len(inputs["input_ids"])):
            ids = features["input_ids"][row]
            for column in ("start_positions", "end_positions"):
                position = labels[column][k]
                assert position == features[column][row]
                assert inputs["input_ids"][k][position] == ids[position]
            assert inputs["input_ids"][k][: len(ids)].tolist() == ids
            row += 1
    assert row == len(features["input_ids"])


@pytest.mark.parametrize("family", FAMILIES)
def test_ask_returns_exact_context_slices(family_model_dir: Any, family: str) -> None:
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(str(family_model_dir(family)), max_length=64, stride=16)
    assert answerer.spec.question_first == (family != "xlnet")
    pairs = [(q, c) for c in ODD_CONTEXTS for q in QUESTIONS[:2]]
    for (_, context), answers in zip(pairs, answerer.answer_batch(pairs, top_k=20), strict=True):
        assert len(answers) == 20
        for answer in answers:
            text = answer["answer"]
            assert text == context[answer["start"] : answer["end"]]
            assert text and text == text.strip(), repr(text)
    scores = [a["score"] for a in answers]
    assert np.all(np.diff(scores) <= 0)
