"""A teacher with the student's word pieces under other ids (MPNet's layout of BERT's uncased
vocabulary): its view of the student's windows against its own tokenizer's windows, its
logits against its own forward pass, the refusals, and a distilled run through it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from families import MODEL_MAX_LENGTH, sample_contexts
from tiny_runs import tiny_run_config

from qa_finetune.training.token_bridge import NoBridge, find_bridge

QUESTION = "Who opened the café in Lyon, and when?"


@pytest.fixture(scope="module")
def student(minilm_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(minilm_dir))


@pytest.fixture(scope="module")
def mpnet_dir(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> Path:
    """A tiny MPNet QA model folder whose tokenizer is laid out as all-mpnet-base-v2's: its
    four specials first, then BERT's uncased vocabulary, then ``<mask>``."""
    import tensorflow as tf
    from transformers import MPNetConfig, MPNetTokenizerFast, TFMPNetForQuestionAnswering

    folder = tmp_path_factory.mktemp("tiny-mpnet")
    pieces = (minilm_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    vocab = folder / "source-vocab.txt"
    vocab.write_text("\n".join(["<s>", "<pad>", "</s>", "<unk>", *pieces, "<mask>"]) + "\n")
    tokenizer = MPNetTokenizerFast(
        vocab_file=str(vocab),
        unk_token="[UNK]",
        do_lower_case=True,
        model_max_length=MODEL_MAX_LENGTH,
    )
    tokenizer.save_pretrained(str(folder))
    tf.keras.utils.set_random_seed(0)
    config = MPNetConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=MODEL_MAX_LENGTH + 2,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = TFMPNetForQuestionAnswering(config)
    model(model.dummy_inputs)
    model.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def teacher(mpnet_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(mpnet_dir))


def _windows(tokenizer: Any, max_length: int, stride: int) -> dict[str, Any]:
    """Overflowing pair windows of the question over the first sample contexts."""
    contexts = sample_contexts()[:6]
    return tokenizer(
        [QUESTION] * len(contexts),
        contexts,
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
    )


def test_mpnet_reads_bert_windows_as_its_own_windows_one_token_longer(
    teacher: Any, student: Any
) -> None:
    bridge = find_bridge(teacher, student, 64)
    assert bridge.extra_separator and not bridge.type_ids
    ours = _windows(student, 64, 16)
    assert len(ours["input_ids"]) > 6  # contexts overflow into several windows
    columns, added = bridge.teacher_columns(ours)
    # The reference: the teacher tokenizer's own pair call. Its layout spends one more token
    # on separators, so one more token of length holds the same context tokens.
    theirs = _windows(teacher, 65, 16)
    assert columns["input_ids"] == theirs["input_ids"]
    assert columns["attention_mask"] == theirs["attention_mask"]
    firsts = [window.index(student.sep_token_id) + 1 for window in ours["input_ids"]]
    assert added.tolist() == firsts
    pairs = zip(columns["input_ids"], added, strict=True)
    assert all(ids[at] == teacher.sep_token_id for ids, at in pairs)


def test_the_teachers_logits_come_back_on_the_students_tokens(
    mpnet_dir: Path, teacher: Any, student: Any
) -> None:
    import tensorflow as tf
    from datasets import Dataset

    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.training.teacher_logits import _chunk_logits

    bridge = find_bridge(teacher, student, 64)
    ours = _windows(student, 64, 16)
    columns = {name: ours[name] for name in ("input_ids", "attention_mask")}
    model = load_qa_model(mpnet_dir)
    start, end, keep = _chunk_logits(model, Dataset.from_dict(columns), 4, bridge)
    # The reference: the teacher on its own tokenizer's windows, one window at a time, less
    # the second separator of its layout.
    for row, ids in enumerate(_windows(teacher, 65, 16)["input_ids"]):
        inputs = {
            "input_ids": tf.constant([ids]),
            "attention_mask": tf.ones((1, len(ids)), tf.int32),
        }
        out = model(inputs)
        added = ours["input_ids"][row].index(student.sep_token_id) + 1
        assert keep[row].sum() == len(ours["input_ids"][row]) == len(ids) - 1
        for found, own in ((start, out.start_logits), (end, out.end_logits)):
            expected = np.delete(own.numpy()[0], added)
            np.testing.assert_allclose(found[row][keep[row]], expected, rtol=1e-4, atol=1e-4)


def test_a_tokenizer_of_the_same_vocabulary_and_layout_maps_id_for_id(
    tmp_path: Path, minilm_dir: Path, student: Any
) -> None:
    from families import distilbert_tokenizer

    other = distilbert_tokenizer(tmp_path / "distilbert", minilm_dir / "vocab.txt")
    bridge = find_bridge(other, student, 384)
    assert not bridge.extra_separator and not bridge.type_ids
    assert bridge.ids.tolist() == list(range(len(student)))
    columns, added = bridge.teacher_columns(_windows(student, 64, 16))
    assert columns["input_ids"] == _windows(other, 64, 16)["input_ids"]
    assert (added == -1).all()
    # The other way round the teacher (BERT) takes token type ids the student never makes.
    with pytest.raises(NoBridge, match="takes token type ids and the student's windows"):
        find_bridge(student, other, 384)


def test_what_cannot_be_bridged_says_why(
    tmp_path: Path, family_tokenizer: Any, teacher: Any, student: Any
) -> None:
    from transformers import BertTokenizerFast

    with pytest.raises(NoBridge, match="split text differently"):
        find_bridge(family_tokenizer("roberta"), student, 64)
    pieces = [piece for piece, _ in sorted(student.get_vocab().items(), key=lambda kv: kv[1])]
    short = tmp_path / "vocab.txt"
    short.write_text("\n".join(pieces[:-3]) + "\n")  # the last three word pieces missing
    smaller = BertTokenizerFast(vocab_file=str(short), do_lower_case=True)
    with pytest.raises(NoBridge, match="3 of the student's 30522 tokens are not in the teacher"):
        find_bridge(smaller, student, 64)
    with pytest.raises(NoBridge, match="is 513 in the teacher's layout, more than its 512"):
        find_bridge(teacher, student, 512)


def test_a_bert_student_distils_from_an_mpnet_teacher(
    mpnet_dir: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from qa_finetune.training.trainer import train

    config = tiny_run_config(
        tiny_model_dir,
        tmp_path,
        run_name="student",
        method="distill",
        teacher=str(mpnet_dir),
        max_steps=2,
    )
    run_dir = train(config)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["method"] == "distill" and metrics["steps"] == 2
    infos = list(tmp_path.glob("features/*/teacher-logits/*/teacher.json"))
    assert len(infos) == 1
    logits = np.load(infos[0].parent / "start.npy")
    windows = json.loads(infos[0].read_text())["windows"]
    assert windows > 0 and np.isfinite(logits).all()
