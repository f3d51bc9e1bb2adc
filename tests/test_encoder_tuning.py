"""Tuning the search's sentence encoder (``tune-encoder``): pairs cut as ``index`` cuts
passages, hard negatives from other contexts without the answer, in-batch targets, the loss
against a NumPy computation of the same vectors, two families, and the saved folder read back
by ``index``'s loader with the vectors it was tuned to give."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.modeling.saving import TUNING_RECORD
from qa_finetune.modeling.sentence_encoder import SentenceEncoder
from qa_finetune.retrieval.bm25 import TextTokenizer
from qa_finetune.retrieval.passages import split_passages
from qa_finetune.retrieval.training_pairs import hard_negatives, question_pairs, recall_at
from qa_finetune.training.encoder_batches import batch_order, contrastive_batch

runner = CliRunner()

LONG = (
    "The Ostra bridge was designed by Karl Lindqvist. It opened in 1912 after six years of "
    "work.\n\nThe river below it floods the meadows every spring, and the farmers move their "
    "sheep to the hills."
)
FACTS = {
    "car": ("Our old automobile refused to start in January, so the mechanic replaced its "
            "battery.", "Which part did the mechanic replace?", "battery"),
    "doctor": ("Doctor Amina Yusuf treats patients with heart conditions at the Harbour "
               "Street hospital.", "Who treats heart conditions?", "Doctor Amina Yusuf"),
    "violin": ("Lena practises the violin for two hours each evening after dinner.",
               "How long does Lena practise?", "two hours"),
    "bakery": ("The bakery on Mill Lane sells rye bread baked in a wood-fired oven.",
               "What bread does the bakery sell?", "rye bread"),
    "train": ("The night train to the capital leaves the central station at eleven.",
              "When does the night train leave?", "eleven"),
    "volcano": ("The island's volcano last erupted in 1783, covering the fields in ash.",
                "When did the volcano last erupt?", "1783"),
}  # fmt: skip


def _row(context: str, question: str, answer: str | None) -> dict[str, Any]:
    if answer is None:
        return {
            "context": context,
            "question": question,
            "answers": {"text": [], "answer_start": []},
        }
    return {
        "context": context,
        "question": question,
        "answers": {"text": [answer], "answer_start": [context.index(answer)]},
    }


def _fact_rows() -> list[dict[str, Any]]:
    return [_row(context, question, answer) for context, question, answer in FACTS.values()]


def test_each_question_is_paired_with_the_passage_holding_its_answer() -> None:
    rows = [
        _row(LONG, "Who designed the Ostra bridge?", "Karl Lindqvist"),
        _row(LONG, "What floods every spring?", "The river below it"),
        _row(LONG, "Where do the sheep go?", "the hills"),
        _row(LONG, "Who painted the bridge?", None),
        _row("A second context, short.", "What is it?", "second context"),
    ]
    found = question_pairs(rows, max_words=12)
    spans = split_passages(LONG, 12)
    assert len(spans) > 2  # the long context is cut, as index would cut it
    assert found.passages[: len(spans)] == [LONG[s:e] for s, e in spans]
    assert found.passages[len(spans) :] == ["A second context, short."]
    assert found.contexts == [0] * len(spans) + [1]  # each context cut once
    assert found.without_answer == 1
    assert len(found.pairs) == 4
    for pair, row in zip(found.pairs, [rows[0], rows[1], rows[2], rows[4]], strict=True):
        start = row["answers"]["answer_start"][0]
        s, e = ([*spans, (0, 24)])[pair.passage]
        assert s <= start < e
        own = found.passages[pair.passage]
        assert own[start - s : start - s + len(pair.answer)] == pair.answer


def test_hard_negatives_come_from_other_contexts_and_never_hold_the_answer() -> None:
    rows = [
        _row("The Ostra bridge was designed by Karl Lindqvist.", "Who designed the Ostra bridge?",
             "Karl Lindqvist"),
        # Other passages that share the question's words: one names the answer, one does not.
        _row("Karl Lindqvist, who designed the Ostra bridge, was born in Malmo.", "Born where?",
             "Malmo"),
        _row("The Ostra bridge was painted red when it was designed again.", "Painted what?",
             "red"),
        _row("Sheep graze on the hills.", "What grazes?", "Sheep"),
    ]  # fmt: skip
    found = question_pairs(rows)
    chosen = hard_negatives(found, TextTokenizer(), per_question=2)
    assert chosen[0] == [2]  # passage 1 holds "Karl Lindqvist"; passage 3 shares no word
    for pair, negatives in zip(found.pairs, chosen, strict=True):
        for number in negatives:
            assert found.contexts[number] != found.contexts[pair.passage]
            assert pair.answer.casefold() not in found.passages[number].casefold()
    assert hard_negatives(found, TextTokenizer(), per_question=0) == [[], [], [], []]


def test_a_batch_holds_each_passage_once_and_never_counts_the_own_context_wrong() -> None:
    rows = [
        _row(LONG, "Who designed the Ostra bridge?", "Karl Lindqvist"),
        _row(LONG, "What was designed?", "The Ostra bridge"),  # the first question's passage
        _row(LONG, "Where do the sheep go?", "the hills"),  # another passage of that context
        _row("Sheep graze on the hills.", "What grazes?", "Sheep"),
    ]
    found = question_pairs(rows, max_words=12)
    assert found.pairs[0].passage == found.pairs[1].passage != found.pairs[2].passage
    last = len(found.passages) - 1
    batch = contrastive_batch(found, [[last], [], [], [0]], [0, 1, 2, 3])
    columns = [found.pairs[0].passage, found.pairs[2].passage, last]
    assert batch.passages == [found.passages[n] for n in columns]
    assert batch.questions == [row["question"] for row in rows]
    assert batch.labels.tolist() == [0, 0, 1, 2]
    # Questions 0-2 share a context: its passages are neither their targets' rivals nor wrong.
    assert batch.allowed.tolist() == [
        [True, False, True],
        [True, False, True],
        [False, True, True],
        [True, True, True],
    ]


def test_batches_cover_every_pair_once_an_epoch_in_a_seeded_order() -> None:
    batches = list(batch_order(10, 4, steps=6, seed=3))
    assert [len(b) for b in batches] == [4, 4, 2, 4, 4, 2]
    assert sorted(n for b in batches[:3] for n in b) == list(range(10))
    assert sorted(n for b in batches[3:] for n in b) == list(range(10))
    assert batches == list(batch_order(10, 4, steps=6, seed=3))
    assert batches[:3] != batches[3:]  # a new shuffle each epoch
    assert list(batch_order(10, 4, steps=2, seed=3)) == batches[:2]
    assert list(batch_order(0, 4, steps=5, seed=3)) == []


def test_recall_counts_the_gold_passage_among_the_k_nearest() -> None:
    passages = np.eye(4, dtype=np.float32)
    questions = np.array([[1, 0, 0, 0], [0.9, 0.1, 0, 0], [0, 0.2, 0.5, 0.9]], np.float32)
    # Gold ranks: 0 (first), 1 (second), 2 (third: 3 and 2 score above 1).
    found = recall_at(questions, passages, [0, 1, 1], ks=(1, 2, 3))
    assert found == {1: pytest.approx(100 / 3), 2: pytest.approx(200 / 3), 3: 100.0}


def _tiny_sentence_encoder(family: str, tokenizer: Any, target: Path, minilm_dir: Path) -> Path:
    """A 2-layer random encoder of ``family`` without dropout, with MiniLM's pooling files."""
    import tensorflow as tf
    from transformers import BertConfig, DistilBertConfig, TFBertModel, TFDistilBertModel

    tf.keras.utils.set_random_seed(0)
    if family == "bert":
        config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)  # fmt: skip
        model = TFBertModel(config)
    else:
        config = DistilBertConfig(vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=2,
                                  hidden_dim=64, dropout=0.0, attention_dropout=0.0)  # fmt: skip
        model = TFDistilBertModel(config)
    model(model.dummy_inputs)
    target.mkdir(parents=True)
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    for name in ("modules.json", "sentence_bert_config.json", "README.md"):
        shutil.copy(minilm_dir / name, target / name)
    shutil.copytree(minilm_dir / "1_Pooling", target / "1_Pooling")
    return target


@pytest.fixture(scope="module")
def tiny_encoders(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path,
                  family_tokenizer: Any) -> dict[str, Path]:  # fmt: skip
    root = tmp_path_factory.mktemp("encoders")
    return {
        family: _tiny_sentence_encoder(family, family_tokenizer(family), root / family, minilm_dir)
        for family in ("bert", "distilbert")
    }


def _loss(questions: np.ndarray, passages: np.ndarray, labels: np.ndarray,
          allowed: np.ndarray, scale: float) -> float:  # fmt: skip
    """The multiple-negatives ranking loss by hand: cross-entropy of each question's own
    passage among the allowed ones, on scale x cosine."""
    total = 0.0
    for row, label in enumerate(labels):
        logits = [
            scale * float(questions[row] @ p)
            for p, ok in zip(passages, allowed[row], strict=True)
            if ok
        ]
        own = scale * float(questions[row] @ passages[label])
        total += np.log(np.sum(np.exp(np.array(logits) - own)))
    return total / len(labels)


@pytest.mark.parametrize("family", ["bert", "distilbert"])
def test_a_step_returns_the_loss_of_the_vectors_before_it_and_learns(
    family: str, tiny_encoders: dict[str, Path]
) -> None:
    from qa_finetune.training.encoder_tuning import EncoderTuner, TuningSettings, tune

    encoder = SentenceEncoder.fresh(str(tiny_encoders[family]))
    found = question_pairs(_fact_rows())
    negatives = [[(n + 1) % 6] for n in range(6)]
    batch = contrastive_batch(found, negatives, [0, 1, 2, 3])
    expected = _loss(encoder.encode(batch.questions), encoder.encode(batch.passages),
                     batch.labels, batch.allowed, 20.0)  # fmt: skip
    settings = TuningSettings(learning_rate=3e-3, warmup_ratio=0.0, batch_size=3, epochs=20)
    info = encoder.info
    tuner = EncoderTuner(encoder.model, encoder.tokenizer, info.pooling, info.max_length,
                         settings, settings.total_steps(6))  # fmt: skip
    assert tuner.step(batch) == pytest.approx(expected, rel=1e-4, abs=1e-4)
    result = tune(tuner, found, negatives)
    assert result.steps == result.planned_steps == 40 and not result.budget_reached
    assert result.mean_loss_last < 0.5 * result.mean_loss_first
    tuned = SentenceEncoder(encoder.model, encoder.tokenizer, info)
    questions = tuned.encode([pair.question for pair in found.pairs])
    assert recall_at(questions, tuned.encode(found.passages), range(6), ks=(1,)) == {1: 100.0}


def _squad(path: Path, rows: list[dict[str, Any]]) -> Path:
    paragraphs = [
        {"context": r["context"], "qas": [{"id": f"q{i}", "question": r["question"],
         "answers": [{"text": r["answers"]["text"][0],
                      "answer_start": r["answers"]["answer_start"][0]}]}]}
        for i, r in enumerate(rows)
    ]  # fmt: skip
    path.write_text(json.dumps({"data": [{"title": "Facts", "paragraphs": paragraphs}]}), "utf-8")
    return path


def test_tune_encoder_saves_a_folder_index_reads_with_the_vectors_it_tuned(
    tiny_encoders: dict[str, Path], tmp_path: Path
) -> None:
    rows = _fact_rows()
    train = _squad(tmp_path / "train.json", rows)
    held = _squad(tmp_path / "held.json", rows[:4])
    base = str(tiny_encoders["bert"])
    before = SentenceEncoder.load(base).encode(["Who treats heart conditions?", "A passage."])
    output = tmp_path / "tuned"
    result = runner.invoke(app, [
        "tune-encoder", "--train-file", str(train), "--validation-file", str(held),
        "--encoder", base, "-o", str(output), "--epochs", "3", "--batch-size", "4",
        "--learning-rate", "1e-3",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    record = json.loads((output / TUNING_RECORD).read_text("utf-8"))
    assert record["pairs"] == 6 and record["passages"] == 6
    assert record["held_out"]["questions"] == 4 and record["held_out"]["passages"] == 4
    # Held out here are training contexts too: counted, and said.
    assert record["held_out"]["passages_also_trained"] == 4
    assert "warning: 4 of the 4 held-out passages are also training passages" in result.output
    assert record["result"]["steps"] == 6  # 2 batches an epoch, 3 epochs
    assert set(record["held_out"]["recall_before"]) == {"recall@1", "recall@5", "recall@20"}
    assert (output / "1_Pooling" / "config.json").is_file() and (output / "modules.json").is_file()
    assert not (output / "README.md").exists()  # the base's card does not describe this one
    assert not (output / "tf_model.h5").exists() and (output / "model.safetensors").is_file()
    tuned = SentenceEncoder.load(str(output))
    assert tuned.info.fingerprint != SentenceEncoder.load(base).info.fingerprint
    texts = ["Who treats heart conditions?", "A passage."]
    assert not np.allclose(tuned.encode(texts), before, atol=1e-4)
    # The base as this process loaded it is untouched by the tuning.
    assert np.array_equal(SentenceEncoder.load(base).encode(texts), before)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "doctor.txt").write_text(FACTS["doctor"][0], "utf-8")
    indexed = runner.invoke(app, ["index", str(docs), "-o", str(tmp_path / "idx"),
                                  "--encoder", str(output)])  # fmt: skip
    assert indexed.exit_code == 0, indexed.output


def test_tune_encoder_refuses_in_one_line_before_any_work(
    tiny_encoders: dict[str, Path], tmp_path: Path
) -> None:
    train = _squad(tmp_path / "train.json", _fact_rows())
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine", "utf-8")
    cases = {
        "taken": (["--train-file", str(train), "-o", str(taken)],
                  f"error: --output {taken} is not empty: name a new folder, or add --overwrite"),
        "no data": (["-o", str(tmp_path / "a")], "error: no training data: qa-finetune "
                    "tune-encoder --train-file FILE -o FOLDER"),
    }  # fmt: skip
    for args, message in cases.values():
        result = runner.invoke(app, ["tune-encoder", *args])
        assert result.exit_code == 1
        assert result.output.strip().splitlines()[-1] == message
    assert (taken / "keep.txt").read_text("utf-8") == "mine"
    not_encoder = tmp_path / "qa-model"
    not_encoder.mkdir()
    (not_encoder / "config.json").write_text('{"model_type": "bert"}', "utf-8")
    result = runner.invoke(app, ["tune-encoder", "--train-file", str(train), "--encoder",
                                 str(not_encoder), "-o", str(tmp_path / "b")])  # fmt: skip
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"error: {not_encoder} is not a sentence encoder (no modules.json in {not_encoder}): "
        "pass a sentence-transformers model such as all-MiniLM-L6-v2"
    )
    assert not (tmp_path / "b").exists()
    unanswerable = tmp_path / "none.json"
    unanswerable.write_text(json.dumps({"data": [{"title": "T", "paragraphs": [{
        "context": "Sheep graze.", "qas": [{"id": "x", "question": "What flies?",
        "answers": [], "is_impossible": True}]}]}]}), "utf-8")  # fmt: skip
    result = runner.invoke(app, ["tune-encoder", "--train-file", str(unanswerable),
                                 "--validation-file", str(unanswerable), "-o",
                                 str(tmp_path / "c"), "--set", "data.allow_no_answer=true",
                                 "--encoder", str(tiny_encoders["bert"])])  # fmt: skip
    assert result.exit_code == 1
    assert "no question with an answer in" in result.output
    assert not (tmp_path / "c").exists()


def test_evaluate_open_searches_with_the_encoder_it_is_given(
    tiny_encoders: dict[str, Path],
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rows = _fact_rows()
    data = _squad(tmp_path / "held.json", rows)
    encoder = str(tiny_encoders["distilbert"])
    report = tmp_path / "report"
    args = ["evaluate", "--model", str(tiny_model_dir), "--data", str(data), "--open",
            "--retriever", "dense", "--encoder", encoder, "--report-dir", str(report),
            "--allow-untrained-head"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    metrics = json.loads((report / "metrics.json").read_text("utf-8"))
    assert metrics["encoder"] == encoder
    # Independently: that encoder's vectors ranked by hand (one passage per context here).
    loaded = SentenceEncoder.load(encoder)
    questions = loaded.encode([row["question"] for row in rows])
    passages = loaded.encode([row["context"] for row in rows])
    expected = recall_at(questions, passages, range(len(rows)), ks=(1,))[1]
    assert metrics["retrievers"]["dense"]["recall@1"] == pytest.approx(expected, abs=0.01)


def test_evaluate_refuses_an_encoder_it_would_not_use(tmp_path: Path) -> None:
    data = _squad(tmp_path / "held.json", _fact_rows())
    not_encoder = tmp_path / "qa-model"
    not_encoder.mkdir()
    (not_encoder / "config.json").write_text('{"model_type": "bert"}', "utf-8")
    base = ["evaluate", "--data", str(data), "--encoder", str(not_encoder)]
    cases = {
        (): f"error: --encoder {not_encoder} is the sentence encoder of --open's dense and "
        "hybrid search: add --open, or drop --encoder",
        ("--open", "--retriever", "bm25"): f"error: --encoder {not_encoder} is the sentence "
        "encoder of --open's dense and hybrid search: drop --retriever bm25, or drop --encoder",
        ("--open",): f"error: {not_encoder} is not a sentence encoder (no modules.json in "
        f"{not_encoder}): pass a sentence-transformers model such as all-MiniLM-L6-v2",
    }
    for extra, message in cases.items():
        result = runner.invoke(app, [*base, *extra])
        assert result.exit_code == 1, extra
        assert result.output.strip().splitlines()[-1] == message


@pytest.mark.parametrize("mode", ["mean", "cls", "max"])
def test_training_pools_as_search_pools(mode: str) -> None:
    from qa_finetune.retrieval.embedding import pool
    from qa_finetune.training.encoder_tuning import tf_pool

    rng = np.random.default_rng(0)
    hidden = rng.standard_normal((3, 5, 8)).astype(np.float32)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], np.int32)
    expected = pool(hidden, mask, mode)
    got = tf_pool(hidden, mask, mode).numpy()
    assert np.abs(got - expected).max() < 1e-6


def test_overwrite_replaces_only_a_folder_tune_encoder_made(tmp_path: Path) -> None:
    train = _squad(tmp_path / "train.json", _fact_rows())
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine", "utf-8")
    result = runner.invoke(
        app, ["tune-encoder", "--train-file", str(train), "-o", str(mine), "--overwrite"]
    )
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"error: {mine} is not empty and was not made by qa-finetune tune-encoder (it has no "
        "tuning.json file): qa-finetune tune-encoder never replaces it; choose a new or empty "
        "--output folder"
    )
    assert (mine / "notes.txt").read_text("utf-8") == "mine"
