"""Answering: batched prediction, exact spans on short and long contexts, inputs and files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from qa_finetune.errors import QAFinetuneError
from qa_finetune.features.labels import prepare_eval_features
from qa_finetune.features.windows import make_spec, make_windows
from qa_finetune.inference.answerer import QuestionAnswerer, get_answer
from qa_finetune.inference.batch_files import answer_batch_file
from qa_finetune.modeling.predict import LOGIT_FILL, predict_features
from qa_finetune.runs.lookup import latest_run

SHORT_CONTEXT = (
    "The Verrin Bay Bridge was designed by Alma Stroud and opened in 1931. "
    "It crosses the bay in three arches of grey granite."
)
QUESTION = "Who designed the Verrin Bay Bridge?"


def long_context(words: int, last: str | None = None) -> str:
    """``words`` filler words (``word0 word1 ...``); ``last`` is put 5 words before the end."""
    tokens = [f"word{i % 97}" for i in range(words)]
    if last is not None:
        tokens[-5] = last
    return " ".join(tokens) + "."


class PeakModel:
    """A stand-in QA model whose start and end logits peak on one token id."""

    def __init__(self, token_id: int) -> None:
        self.token_id = token_id
        self.calls = 0

    def __call__(self, inputs: dict[str, Any], training: bool = False) -> Any:
        import tensorflow as tf

        self.calls += 1
        hits = tf.cast(tf.equal(inputs["input_ids"], self.token_id), tf.float32) * 10.0
        return SimpleNamespace(start_logits=hits, end_logits=hits)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> Any:
    from qa_finetune.modeling.reference import load_tokenizer

    return load_tokenizer(tiny_model_dir)


@pytest.fixture(scope="module")
def answerer(tiny_model_dir: Path) -> QuestionAnswerer:
    # Small windows, so that even modest contexts span many of them.
    return QuestionAnswerer.load(str(tiny_model_dir), max_length=64, stride=16, batch_size=8)


def peak_answerer(tokenizer: Any, token: str) -> QuestionAnswerer:
    token_id = tokenizer.convert_tokens_to_ids(token)
    assert token_id != tokenizer.unk_token_id
    return QuestionAnswerer(PeakModel(token_id), tokenizer, make_spec(tokenizer, 64, 16))


def check_answers(answers: list[dict[str, Any]], context: str) -> None:
    for item in answers:
        assert set(item) == {"answer", "score", "start", "end"}
        assert 0 <= item["start"] < item["end"] <= len(context)
        assert context[item["start"] : item["end"]] == item["answer"]
        assert 0.0 < item["score"] <= 1.0
    scores = [item["score"] for item in answers]
    assert scores == sorted(scores, reverse=True)
    assert len({(a["start"], a["end"]) for a in answers}) == len(answers)


# --------------------------------------------------------------------------------------------
# predict_features
# --------------------------------------------------------------------------------------------


def test_predict_features_matches_one_window_at_a_time(
    answerer: QuestionAnswerer, tokenizer: Any
) -> None:
    import tensorflow as tf
    from datasets import Dataset

    examples = Dataset.from_dict(
        {
            "id": ["a", "b", "c"],
            "question": ["Who?", "When did the bridge open?", "What?"],
            "context": [SHORT_CONTEXT, long_context(120), "Short one."],
        }
    )
    features = examples.map(
        prepare_eval_features,
        batched=True,
        fn_kwargs={"tokenizer": tokenizer, "spec": make_spec(tokenizer, 48, 8)},
        remove_columns=examples.column_names,
    )
    lengths = [len(ids) for ids in features["input_ids"]]
    assert len(set(lengths)) > 2  # windows of several lengths get sorted and scattered back

    start, end = predict_features(answerer.model, features, batch_size=3)

    assert start.shape == end.shape == (len(features), max(lengths))
    assert start.dtype == end.dtype == np.float32
    for i, length in enumerate(lengths):
        single = {
            name: tf.constant([features[i][name]], dtype=tf.int32)
            for name in ("input_ids", "attention_mask", "token_type_ids")
        }
        outputs = answerer.model(single, training=False)
        np.testing.assert_allclose(start[i, :length], outputs.start_logits[0], atol=1e-4)
        np.testing.assert_allclose(end[i, :length], outputs.end_logits[0], atol=1e-4)
        assert (start[i, length:] == LOGIT_FILL).all()
        assert (end[i, length:] == LOGIT_FILL).all()

    # The compiled forward, and a mapping of lists (what the tokenizer returns), agree.
    as_lists = {name: features[name] for name in ("input_ids", "attention_mask", "token_type_ids")}
    start_lists, end_lists = predict_features(answerer.model, as_lists, batch_size=5, compile=True)
    np.testing.assert_allclose(start_lists, start, atol=1e-4)
    np.testing.assert_allclose(end_lists, end, atol=1e-4)


def test_predict_features_empty_and_bad_batch_size(answerer: QuestionAnswerer) -> None:
    start, end = predict_features(answerer.model, {"input_ids": [], "attention_mask": []}, 4)
    assert start.shape == end.shape == (0, 0)
    with pytest.raises(QAFinetuneError, match="batch size"):
        predict_features(answerer.model, {"input_ids": [[1, 2]]}, 0)


def test_short_calls_run_eagerly_and_long_ones_compile(tokenizer: Any) -> None:
    from qa_finetune.modeling.predict import COMPILE_AFTER_BATCHES

    model = PeakModel(tokenizer.convert_tokens_to_ids("zebra"))
    windows = {"input_ids": [[101, 29145, 102]] * 4, "attention_mask": [[1, 1, 1]] * 4}
    eager, _ = predict_features(model, windows, batch_size=2)
    assert model.calls == 2  # one Python call per batch: eager
    many = {name: rows * COMPILE_AFTER_BATCHES for name, rows in windows.items()}
    compiled, _ = predict_features(model, many, batch_size=2)
    calls = model.calls
    assert calls < 2 + 2 * COMPILE_AFTER_BATCHES  # traced, not called per batch
    predict_features(model, windows, batch_size=2)
    assert model.calls == calls  # compiled once, used from then on
    np.testing.assert_array_equal(compiled[:4], eager)
    forced, _ = predict_features(PeakModel(29145), windows, batch_size=1, compile=True)
    np.testing.assert_array_equal(forced, eager)


# --------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------


def test_short_context_gives_exact_substrings_in_order(answerer: QuestionAnswerer) -> None:
    answers = answerer.answer(QUESTION, SHORT_CONTEXT, top_k=5)
    assert len(answers) == 5
    check_answers(answers, SHORT_CONTEXT)


def test_long_context_gives_exact_substrings(answerer: QuestionAnswerer) -> None:
    context = long_context(3000)
    windows = make_windows(
        {"id": ["x"], "question": [QUESTION], "context": [context]},
        answerer.tokenizer,
        answerer.spec,
    )
    assert len(windows.sample_map) > 50
    answers = answerer.answer(QUESTION, context, top_k=3)
    check_answers(answers, context)


def test_answer_can_come_from_the_last_window_of_20000_words(tokenizer: Any) -> None:
    qa = peak_answerer(tokenizer, "zebra")
    context = long_context(20_000, last="zebra")  # the size the issue names
    [best] = qa.answer("Which animal?", context)
    assert best["answer"] == "zebra"
    assert best["start"] == context.rindex("zebra") > len(context) - 40
    assert best["score"] > 0.9


def test_top_k_is_ranked_and_top_1_is_its_head(answerer: QuestionAnswerer) -> None:
    ranked = answerer.answer(QUESTION, SHORT_CONTEXT, top_k=4)
    [best] = answerer.answer(QUESTION, SHORT_CONTEXT)
    assert (best["start"], best["end"]) == (ranked[0]["start"], ranked[0]["end"])
    assert best["score"] >= ranked[0]["score"]  # fewer candidates share the probability
    check_answers(ranked, SHORT_CONTEXT)


def test_no_answer_when_the_null_score_wins(tokenizer: Any) -> None:
    qa = peak_answerer(tokenizer, tokenizer.cls_token)
    [best] = qa.answer(QUESTION, SHORT_CONTEXT, allow_no_answer=True)
    assert best == {"answer": "", "score": pytest.approx(best["score"]), "start": 0, "end": 0}
    assert best["score"] > 0.99
    [forced] = qa.answer(QUESTION, SHORT_CONTEXT)
    assert forced["answer"]  # without the option a span is always returned
    ranked = qa.answer(QUESTION, SHORT_CONTEXT, top_k=3, allow_no_answer=True)
    assert ranked[0]["answer"] == "" and all(a["answer"] for a in ranked[1:])


def test_get_answer_keeps_the_notebook_signature(answerer: QuestionAnswerer) -> None:
    context = long_context(800)
    answer = get_answer(answerer.tokenizer, answerer.model, QUESTION, context)
    assert answer and answer in context


def test_answer_batch_accepts_pairs_and_dicts(tokenizer: Any) -> None:
    qa = peak_answerer(tokenizer, "zebra")
    pairs = [
        ("Which animal?", "A zebra ran."),
        {"question": "Which one?", "context": long_context(400, last="zebra")},
    ]
    results = qa.answer_batch(pairs, top_k=2)
    assert [r[0]["answer"] for r in results] == ["zebra", "zebra"]
    assert qa.answer_batch([]) == []


@pytest.mark.parametrize(
    ("question", "context", "message"),
    [
        ("", SHORT_CONTEXT, "question is empty"),
        ("   ", SHORT_CONTEXT, "question is empty"),
        (QUESTION, "", "context is empty"),
        (QUESTION, " \n\t", "context is empty"),
        (None, SHORT_CONTEXT, "question must be text"),
        ("why " * 80, SHORT_CONTEXT, "too long for windows of 64 tokens"),
    ],
)
def test_bad_input_is_a_one_line_error(
    tokenizer: Any, question: Any, context: Any, message: str
) -> None:
    qa = peak_answerer(tokenizer, "zebra")
    with pytest.raises(QAFinetuneError, match=message) as caught:
        qa.answer(question, context)
    assert "\n" not in str(caught.value)


def test_bad_items_in_a_batch_are_named(tokenizer: Any) -> None:
    qa = peak_answerer(tokenizer, "zebra")
    with pytest.raises(QAFinetuneError, match="pair 2: missing 'context'"):
        qa.answer_batch([("Q?", "A zebra."), {"question": "Q?"}])
    with pytest.raises(QAFinetuneError, match="question 2: the question is"):
        qa.answer_batch([("Q?", "A zebra."), ("why " * 80, "A zebra.")])
    with pytest.raises(QAFinetuneError, match="top_k"):
        qa.answer("Q?", "A zebra.", top_k=0)


def test_load_takes_window_settings_from_the_run_config(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run_dir / "model")
    (run_dir / "config.yaml").write_text("preprocess:\n  max_length: 96\n  stride: 24\n")
    loaded = QuestionAnswerer.load(str(run_dir))
    assert (loaded.spec.max_length, loaded.spec.stride) == (96, 24)
    # An explicit window wins; the default stride shrinks to fit a small window.
    loaded = QuestionAnswerer.load(str(run_dir / "model"), max_length=40)
    assert (loaded.spec.max_length, loaded.spec.stride) == (40, 20)
    with pytest.raises(QAFinetuneError, match="stride"):
        QuestionAnswerer.load(str(tiny_model_dir), max_length=64, stride=64)


# --------------------------------------------------------------------------------------------
# latest_run and batch files
# --------------------------------------------------------------------------------------------


def make_run(root: Path, name: str, mtime: float) -> Path:
    config = root / name / "model" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text("{}")
    os.utime(config, (mtime, mtime))
    return root / name


def test_latest_run_picks_the_newest_trained_run(tmp_path: Path) -> None:
    make_run(tmp_path, "old", 1_000_000)
    newest = make_run(tmp_path, "new", 2_000_000)
    make_run(tmp_path, "older", 500_000)
    (tmp_path / "features" / "abc").mkdir(parents=True)  # no model: ignored
    assert latest_run(tmp_path) == newest


@pytest.mark.parametrize("layout", ["empty", "missing"])
def test_latest_run_without_runs_says_what_to_do(tmp_path: Path, layout: str) -> None:
    root = tmp_path / "outputs"
    if layout == "empty":
        (root / "features").mkdir(parents=True)
    with pytest.raises(QAFinetuneError, match=r"no trained run in .*qa-finetune train.*--model"):
        latest_run(root)


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


BATCH_LINES = [
    json.dumps({"id": "a", "question": "Which animal?", "context": "A zebra ran home."}),
    '{"question": "broken", ',
    json.dumps({"question": "Which animal?", "context": long_context(300, last="zebra")}),
    json.dumps({"question": "No context here?"}),
    "",
]


def test_batch_file_stops_at_a_malformed_line(tokenizer: Any, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", BATCH_LINES)
    output = tmp_path / "out.jsonl"
    with pytest.raises(QAFinetuneError, match=r"in\.jsonl:2: not valid JSON.*--skip-errors"):
        answer_batch_file(peak_answerer(tokenizer, "zebra"), source, output)
    assert not output.exists()  # nothing is written before every line has been read


def test_batch_file_skips_bad_lines_when_asked(
    tokenizer: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from qa_finetune.cli.logs import show_library_logs

    show_library_logs()  # the skipped lines are logged warnings: stderr, as `ask` shows them
    source = write_lines(tmp_path / "in.jsonl", BATCH_LINES)
    output = tmp_path / "out.jsonl"
    written, failed = answer_batch_file(
        peak_answerer(tokenizer, "zebra"), source, output, top_k=2, skip_errors=True
    )
    assert (written, failed) == (2, 2)
    errors = capsys.readouterr().err
    assert "in.jsonl:2: not valid JSON" in errors
    assert "in.jsonl:4: missing 'context'" in errors
    records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == ["a", "3"]
    for record in records:
        assert record["answer"] == "zebra"
        assert {"id", "question", "answer", "score", "start", "end", "answers"} <= set(record)
        assert len(record["answers"]) == 2


def test_batch_file_writes_to_stdout(
    tokenizer: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_lines(tmp_path / "in.jsonl", BATCH_LINES[:1])
    assert answer_batch_file(peak_answerer(tokenizer, "zebra"), source, None) == (1, 0)
    record = json.loads(capsys.readouterr().out)
    assert record == {
        "id": "a",
        "question": "Which animal?",
        "answer": "zebra",
        "score": pytest.approx(record["score"]),
        "start": 2,
        "end": 7,
    }
