"""Long contexts: the passages read are ranked for the question and answers come back at their
exact offsets in the text the user gave (HTML, PDF text, CRLF, emoji); the cap on context
length and the progress line of long work."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from document_files import pdf_bytes
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.documents.reading import extract_text
from qa_finetune.features.windows import make_spec
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.retrieval.long_contexts import LongContexts, Narrowed
from qa_finetune.retrieval.passage_ranking import bm25_scores, rank_passages

# Small passages and a low threshold, so that a page of text is "long".
SMALL = LongContexts(threshold_words=30, top_passages=1, passage_words=40)
ANSWER = "The Millbrook footbridge over the Tarrow was designed by the engineer Alma Stroud."
QUESTION = "Who designed the Millbrook footbridge?"
TOWNS = ["Ashby", "Brill", "Corran", "Dunmore", "Elsworth", "Fenwick", "Garron", "Holt"]


def distractors(count: int) -> list[str]:
    """Paragraphs about other things, none naming the bridge or its designer."""
    return [
        f"The market of {TOWNS[i % 8]} number {i} opens every spring and sells wool, cheese "
        f"and apples from the farms of the valley; its hall was rebuilt after a fire."
        for i in range(count)
    ]


def document(separator: str = "\n\n", at: int = 17, count: int = 30) -> str:
    paragraphs = distractors(count)
    paragraphs.insert(at, ANSWER)
    return separator.join(paragraphs)


def check_exact(narrowed: Narrowed) -> None:
    """Every passage read is the original text at its original offsets."""
    pieces = zip(narrowed.original_starts, narrowed.lengths, narrowed.passage_texts(), strict=True)
    for start, length, text in pieces:
        assert text == narrowed.original[start : start + length]
        assert text == text.strip() and text


def answer_back(narrowed: Narrowed, answer: str) -> tuple[int, int]:
    """The offsets in the original of ``answer`` found in a passage read, as an answer read
    there is placed (its passage's start plus its offset in the passage)."""
    for start, text in zip(narrowed.original_starts, narrowed.passage_texts(), strict=True):
        if answer in text:
            return start + text.index(answer), start + text.index(answer) + len(answer)
    raise AssertionError(f"{answer!r} is in no passage read")


def test_the_ranking_reads_the_passage_that_holds_the_answer() -> None:
    text = document()
    narrowed = SMALL.narrow(QUESTION, text)
    assert narrowed is not None
    assert (narrowed.passages_read, narrowed.passages_total) == (1, 31)
    assert narrowed.passage_texts() == [ANSWER]
    start, end = answer_back(narrowed, "Alma Stroud")
    assert text[start:end] == "Alma Stroud"
    assert start == text.index("Alma Stroud")


def test_bm25_against_a_hand_computation() -> None:
    # Two passages; "bridge" is in one: idf = ln(1 + (2 - 1 + 0.5) / (1 + 0.5)) = ln 2.
    # Passage 0 has 2 terms (the mean length 2.5): tf 1 / (1 + 1.5 * (0.25 + 0.75 * 2 / 2.5)).
    scores = bm25_scores(["bridge"], [["bridge", "stone"], ["road", "wide", "long"]])
    norm = 1.5 * (0.25 + 0.75 * 2 / 2.5)
    assert scores.tolist() == pytest.approx([0.6931471805599453 * 2.5 / (1 + norm), 0.0])


def test_equal_scores_go_to_the_earlier_passage() -> None:
    assert [n for n, _ in rank_passages("zebra", ["a cat", "a dog", "a cow"])] == [0, 1, 2]


@pytest.mark.parametrize("separator", ["\r\n\r\n", "\n\n", "\n \n\t\n"])
def test_crlf_and_spaced_blank_lines_map_back_exactly(separator: str) -> None:
    text = document(separator).replace("sells wool, cheese", "sells wool,\r\ncheese")
    narrowed = SMALL.narrow(QUESTION, text)
    assert narrowed is not None
    check_exact(narrowed)
    start, end = answer_back(narrowed, "Alma Stroud")
    assert (start, text[start:end]) == (text.index("Alma Stroud"), "Alma Stroud")


def test_emoji_and_other_scripts_before_the_answer_map_back_exactly() -> None:
    paragraphs = [p.replace("apples", "apples 🍎🙂 東京") for p in distractors(30)]
    paragraphs.insert(20, "🙂 " + ANSWER.replace("Alma Stroud", "Alma Stroud 👩‍🔧"))
    text = "\n\n".join(paragraphs)
    narrowed = SMALL.narrow(QUESTION, text)
    assert narrowed is not None
    check_exact(narrowed)
    start, end = answer_back(narrowed, "Alma Stroud 👩‍🔧")
    assert text[start:end] == "Alma Stroud 👩‍🔧"
    assert start == text.index("Alma Stroud")


def test_html_text_maps_back_exactly() -> None:
    body = "".join(f"<p>{p}</p>\n" for p in distractors(12))
    html = f"<html><body><h1>Valley</h1>\n{body}<p>{ANSWER}</p>\n{body}</body></html>"
    text = extract_text(html.encode(), ".html", Path("valley.html"))
    narrowed = SMALL.narrow(QUESTION, text)
    assert narrowed is not None
    check_exact(narrowed)
    start, end = answer_back(narrowed, "Alma Stroud")
    assert (start, text[start:end]) == (text.index("Alma Stroud"), "Alma Stroud")


def test_pdf_text_maps_back_exactly() -> None:
    def page(line: str) -> bytes:
        return b"BT /F1 12 Tf 72 720 Td (" + line.encode("latin-1") + b") Tj ET"

    pages = [page(p) for p in distractors(10)]
    pages.insert(6, page(ANSWER))
    text = extract_text(pdf_bytes(*pages), ".pdf", Path("valley.pdf"))
    narrowed = SMALL.narrow(QUESTION, text)
    assert narrowed is not None
    check_exact(narrowed)
    start, end = answer_back(narrowed, "Alma Stroud")
    assert (start, text[start:end]) == (text.index("Alma Stroud"), "Alma Stroud")


class TopicEncoder:
    """A stand-in sentence encoder: a text about the bridge (or a question about a crossing)
    points one way, anything else the other; it counts the texts it encodes."""

    def __init__(self) -> None:
        self.encoded: list[int] = []

    def encode(self, texts: Sequence[str], progress: Any = None) -> np.ndarray:
        self.encoded.append(len(texts))
        near = [("Stroud" in t or "crossing" in t) for t in texts]
        return np.array([[1.0, 0.0] if n else [0.6, 0.8] for n in near], dtype=np.float32)


def test_dense_ranking_finds_the_passage_without_a_shared_word() -> None:
    from qa_finetune.retrieval.passage_ranking import EncodedRanking

    text = document()
    question = "Who made the crossing?"  # no term in common with the answer's passage
    assert SMALL.narrow(question, text) is None  # BM25 has nothing to rank by
    encoder = TopicEncoder()
    dense = replace(SMALL, rank=EncodedRanking(encoder, hybrid=False))
    narrowed = dense.narrow(question, text)
    assert narrowed is not None and narrowed.passage_texts() == [ANSWER]
    assert narrowed.scores == (pytest.approx(10.0),)  # DENSE_WEIGHT x cosine 1
    check_exact(narrowed)
    # A second question of the same document encodes only the question.
    dense.narrow("Who designed the crossing?", text)
    assert encoder.encoded == [31, 1, 1]


def test_hybrid_is_bm25_plus_ten_times_the_cosine() -> None:
    from qa_finetune.retrieval.fusion import DENSE_WEIGHT
    from qa_finetune.retrieval.passage_ranking import EncodedRanking, passage_terms

    texts = ["The bridge of Alma Stroud.", "A market and a bridge.", "Cheese and wool."]
    question = "Who built the bridge crossing?"
    terms = passage_terms([question, *texts])
    bm25 = bm25_scores(terms[0], terms[1:])
    cosines = [1.0, 0.0, 0.0]  # the question and passage 0 point the same way
    cosines[1:] = [0.6, 0.6]  # the others: (0.6, 0.8) . (1, 0)
    expected = sorted(
        ((i, bm25[i] + DENSE_WEIGHT * cosines[i]) for i in range(3)), key=lambda p: -p[1]
    )
    ranked = EncodedRanking(TopicEncoder(), hybrid=True)(question, texts)
    assert [n for n, _ in ranked] == [n for n, _ in expected]
    assert [s for _, s in ranked] == pytest.approx([s for _, s in expected])


def test_short_contexts_no_shared_term_and_read_all_read_everything() -> None:
    assert SMALL.narrow(QUESTION, ANSWER) is None  # under the threshold
    assert SMALL.narrow("Why zebras?", document()) is None  # nothing to rank by
    everything = LongContexts(threshold_words=30, top_passages=1, read_all=True)
    assert everything.narrow(QUESTION, document()) is None


class PeakModel:
    """Start and end logits that peak on one token id wherever it is."""

    def __init__(self, token_id: int) -> None:
        self.token_id = token_id

    def __call__(self, inputs: dict[str, Any], training: bool = False) -> Any:
        import tensorflow as tf

        hits = tf.cast(tf.equal(inputs["input_ids"], self.token_id), tf.float32) * 10.0
        return SimpleNamespace(start_logits=hits, end_logits=hits)


def test_ask_answers_from_the_passage_read_at_its_original_offset(tiny_model_dir: Path) -> None:
    from qa_finetune.modeling.reference import load_tokenizer

    tokenizer = load_tokenizer(tiny_model_dir)
    model = PeakModel(tokenizer.convert_tokens_to_ids("zebra"))
    answerer = QuestionAnswerer(model, tokenizer, make_spec(tokenizer, 64, 16))
    answerer.long_contexts = SMALL
    paragraphs = [p.replace("wool", "zebra") for p in distractors(30)]  # a zebra everywhere
    paragraphs.insert(17, ANSWER.replace("the engineer", "a zebra and"))
    text = "\r\n\r\n".join(paragraphs)
    seen: list[int] = []
    answerer.progress = lambda total: seen.append(total) or None
    [best] = answerer.answer(QUESTION, text)
    assert text[best["start"] : best["end"]] == best["answer"] == "zebra"
    assert best["start"] == text.index("a zebra and") + 2  # the answer's passage, not the first
    answerer.long_contexts = LongContexts(read_all=True)
    answerer.answer(QUESTION, text)
    assert seen[0] < 5 < seen[1]  # windows read: the passage's, then every one


def run(args: list[str]) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stderr.splitlines()


def test_a_context_over_the_cap_is_refused_naming_the_flag_and_index(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("word " * 30, encoding="utf-8")
    code, errors = run(
        [
            "ask",
            "Who?",
            "--context-file",
            tmp_path / "big.txt",
            "--model",
            tmp_path / "none",
            "--max-context-chars",
            "100",
        ]
    )
    assert code == 1
    assert errors == [
        "error: the context is 150 characters, over the limit of 100 (--max-context-chars): "
        "raise the limit, or index a collection of documents with `qa-finetune index DOCS "
        "--output INDEX` and ask with --index INDEX"
    ]


def test_a_batch_line_over_the_cap_is_refused(tmp_path: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_text('{"question": "Who?", "context": "' + "x" * 120 + '"}\n', encoding="utf-8")
    code, errors = run(["ask", "--batch", batch, "--max-context-chars", "100"])
    assert code == 1
    assert errors == [
        f"error: {batch}:1: the context is 120 characters, over the limit of 100 "
        "(--max-context-chars): raise the limit, or index a collection of documents with "
        "`qa-finetune index DOCS --output INDEX` and ask with --index INDEX; fix the line or "
        "pass --skip-errors"
    ]


def test_read_all_with_an_index_is_refused(tmp_path: Path) -> None:
    code, errors = run(["ask", "Who?", "--index", tmp_path, "--read-all"])
    assert code == 1
    assert errors == [
        "error: --read-all reads every window of a context given with the question; with "
        "--index the passages found are read (--top-passages): drop one of them"
    ]


def test_evaluate_reads_a_long_context_s_passages_and_scores_the_whole(
    tiny_model_dir: Path,
) -> None:
    from qa_finetune.evaluation.question_reading import predict_and_score
    from qa_finetune.modeling.for_answering import load_for_answering

    text = document(count=50)  # about 1,400 words: over the threshold
    record = {
        "id": "q1",
        "title": "Valley",
        "question": QUESTION,
        "context": text,
        "answers": {"text": ["Alma Stroud"], "answer_start": [text.index("Alma Stroud")]},
    }
    loaded = load_for_answering(str(tiny_model_dir), max_length=64, stride=16)
    result, windows = predict_and_score(loaded, [record], allow_no_answer=False)
    predictions = result["predictions"]
    assert result["long_contexts_narrowed"] == 1 and result["total"] == 1
    assert list(predictions.answers) == ["q1"]  # the passages' own entries are gone
    for candidate in predictions.nbest["q1"]:
        assert text[candidate["start"] : candidate["end"]] == candidate["text"]
    assert predictions.answers["q1"] == predictions.nbest["q1"][0]["text"]
    whole, every = predict_and_score(loaded, [record], allow_no_answer=False, read_all=True)
    assert "long_contexts_narrowed" not in whole and every > 2 * windows  # 44 against 18


def _two_passages(no_answer: tuple[float, float]) -> Any:
    from qa_finetune.decoding.spans import Predictions

    # Passage 0's span leads its "no answer" by 1 logit, passage 1's by 6.
    return Predictions(
        nbest={
            "0": [{"text": "Alma", "start": 0, "end": 4, "score": 5.0}],
            "1": [{"text": "Bo", "start": 2, "end": 4, "score": 9.0}],
        },
        null_score_diff={"0": -1.0, "1": -6.0},
        no_answer_score=dict(zip("01", no_answer, strict=True)),
    )


def test_the_answer_is_chosen_across_passages_by_margin_and_bm25() -> None:
    from qa_finetune.decoding.long_context_choice import answers_across_passages

    text = "xx Alma yy, a Bo."
    # The passages "Alma yy," and "a Bo.", at 3 and 12.
    predictions = _two_passages((-1.0, -6.0))
    # Equal retrieval: passage 1 (margin 6) wins; 3 BM25 points ahead, passage 0 does (1 + 2 x 3).
    for scores, expected in (((0.0, 0.0), (14, 16)), ((3.0, 0.0), (3, 7))):
        passages = Narrowed.of(text, [(3, 11), (12, 17)], 2, scores)
        ranked, chosen = answers_across_passages(
            predictions, ["0", "1"], passages, 0.0, False, top_k=2
        )
        assert (ranked[0]["start"], ranked[0]["end"]) == expected
        assert [a["answer"] for a in ranked] == [text[a["start"] : a["end"]] for a in ranked]
        assert {a["answer"] for a in ranked} == {"Alma", "Bo"}
        assert len(chosen) == 2 and sum(a["score"] for a in ranked) == pytest.approx(1.0)


def test_no_answer_when_the_rule_abstains_in_every_passage() -> None:
    from qa_finetune.decoding.long_context_choice import answers_across_passages

    predictions = _two_passages((2.0, 3.0))  # both over the threshold 0
    passages = Narrowed.of("xx Alma yy, a Bo.", [(3, 11), (12, 17)], 2, (1.0, 1.0))
    ranked, chosen = answers_across_passages(predictions, ["0", "1"], passages, 0.0, True)
    assert (ranked, chosen) == ([{"answer": "", "score": 1.0, "start": 0, "end": 0}], [])
    answered, _ = answers_across_passages(predictions, ["0", "1"], passages, 0.0, False)
    assert answered[0]["answer"] == "Bo"  # without the rule both passages take part


def test_serve_answers_a_long_context_as_ask_does_and_read_all_reads_every_window(
    tiny_model_dir: Path,
) -> None:
    from qa_finetune.modeling.reference import load_tokenizer
    from qa_finetune.serving.service import AnswerService, ServeSettings

    tokenizer = load_tokenizer(tiny_model_dir)
    model = PeakModel(tokenizer.convert_tokens_to_ids("zebra"))
    paragraphs = [p.replace("wool", "zebra") for p in distractors(50)]
    paragraphs.insert(17, ANSWER.replace("the engineer", "a zebra and"))
    text = "\r\n\r\n".join(paragraphs)  # about 1,400 words: over the threshold
    sizes = {}
    for read_all in (False, True):
        answerer = QuestionAnswerer(model, tokenizer, make_spec(tokenizer, 64, 16))
        service = AnswerService(answerer, ServeSettings("tiny", max_wait_ms=0, read_all=read_all))
        service.batcher.start()
        try:
            windowed = service.window(QUESTION, text)
            sizes[read_all] = windowed.size
            [best] = service.queue(windowed).result(60)
        finally:
            service.close()
        assert text[best["start"] : best["end"]] == best["answer"] == "zebra"
        if not read_all:  # from the passage that holds the answer, whose BM25 is the best
            narrowed = LongContexts().narrow(QUESTION, text)
            assert narrowed is not None
            pieces = zip(narrowed.original_starts, narrowed.passage_texts(), strict=True)
            [(first, passage)] = [(f, p) for f, p in pieces if "a zebra and" in p]
            assert first <= best["start"] < first + len(passage)
            assert best == answerer.answer(QUESTION, text)[0]
    assert sizes == {False: 18, True: 44}  # windows of 64 tokens: 3 passages, every one


def test_a_batch_line_over_the_cap_is_refused_with_an_index_too(tmp_path: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_text('{"question": "Who?", "context": "' + "x" * 120 + '"}\n', encoding="utf-8")
    before = batch.read_bytes()
    code, errors = run(
        ["ask", "--batch", batch, "--index", tmp_path / "none", "--max-context-chars", "100"]
    )
    assert code == 1
    assert errors[0].startswith(f"error: {batch}:1: the context is 120 characters, over the limit")
    assert batch.read_bytes() == before and sorted(tmp_path.iterdir()) == [batch]


def test_confidence_and_not_sure_come_from_the_passages_read(calibrated_tiny_run: Path) -> None:
    answerer = QuestionAnswerer.load(str(calibrated_tiny_run))
    answerer.long_contexts = SMALL
    text = document()
    [best] = answerer.answer(QUESTION, text, allow_no_answer=True)
    assert 0.0 <= best["confidence"] <= 1.0
    assert text[best["start"] : best["end"]] == best["answer"]
    answerer.answer_below(1.0)  # nothing is that sure: "not sure", the candidate kept
    [unsure] = answerer.answer(QUESTION, text)
    assert unsure["not_sure"] and (unsure["answer"], unsure["start"], unsure["end"]) == ("", 0, 0)
    kept = unsure["best_candidate"]
    assert text[kept["start"] : kept["end"]] == kept["answer"] != ""
