"""Semantic search with the embedded all-MiniLM-L6-v2: questions that share no word with
their document find it (and a lexical one still does), a re-index embeds only what changed,
an index without embeddings answers with BM25 and says so, and a changed encoder or a folder
that is not a sentence encoder is refused in one line."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from qa_finetune.cli.app import app
from qa_finetune.modeling.index_search import open_for_search
from qa_finetune.modeling.sentence_encoder import SentenceEncoder
from qa_finetune.retrieval.bm25 import RetrievalError
from qa_finetune.retrieval.building import IndexSettings, build_index
from qa_finetune.retrieval.embedding import EncoderInfo, normalise
from qa_finetune.retrieval.index_files import MANIFEST
from qa_finetune.retrieval.passage_index import PassageIndex

DOCUMENTS = {
    "car.txt": "Our old automobile refused to start during the freezing January mornings, so "
    "the mechanic replaced its battery.",
    "doctor.txt": "Doctor Amina Yusuf treats patients with heart conditions at the Harbour "
    "Street hospital.",
    "violin.txt": "Lena practises the violin for two hours each evening after dinner.",
    "bridge.txt": "The Ostra bridge was designed by the engineer Karl Lindqvist and opened in "
    "1912.",
    "river.txt": "The Tessen river floods the low meadows of the valley every spring.",
    "bakery.txt": "The bakery on Mill Lane sells rye bread baked in a wood-fired oven before dawn.",
    "garden.txt": "Tomatoes in the community garden ripen late because of the cool coastal "
    "summers.",
    "library.txt": "The town library lends telescopes to members who want to watch the stars.",
    "football.txt": "The local football club won the regional cup after a penalty shoot-out in "
    "May.",
    "train.txt": "The night train to the capital leaves the central station at eleven o'clock.",
    "cat.txt": "Mira's grey cat sleeps on the warm windowsill every afternoon.",
    "volcano.txt": "The island's volcano last erupted in 1783, covering the fields in ash.",
}
# Three questions that share no content word with their document, and a lexical one.
QUESTIONS = {
    "Which vehicle would not turn on when it was very cold?": "car.txt",
    "Who is the cardiologist?": "doctor.txt",
    "What musical instrument does she rehearse at night?": "violin.txt",
    "Who designed the Ostra bridge?": "bridge.txt",
}

runner = CliRunner()


class CountingEncoder:
    """Vectors from a hash of each text (the same text, the same vector), counting texts."""

    def __init__(self, fingerprint: str = "feedfeedfeedfeed") -> None:
        self.info = EncoderInfo("counting", fingerprint, 8, "mean", 64)
        self.embedded: list[str] = []

    def encode(self, texts: Sequence[str], progress: Any = None) -> np.ndarray:
        self.embedded.extend(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:8], np.uint8) for t in texts]
        return normalise(np.asarray(rows, dtype=np.float32) + 1.0)


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder.load()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text + "\n", "utf-8")
    return folder


def _top(index_dir: Path, retriever: str | None, question: str) -> str:
    index, _ = open_for_search(index_dir, retriever)
    return Path(index.search(question, 3)[0].passage.document).name


def test_paraphrased_questions_find_their_documents(
    docs: Path, tmp_path: Path, encoder: SentenceEncoder
) -> None:
    output = tmp_path / "index"
    build_index([docs], output, IndexSettings(encoder=encoder))
    for question, document in QUESTIONS.items():
        assert _top(output, None, question) == document, question  # hybrid, the default
        assert _top(output, "dense", question) == document, question
    # BM25 alone finds the lexical one and misses the car (the "Tessen river").
    assert _top(output, "bm25", "Who designed the Ostra bridge?") == "bridge.txt"
    index, _ = open_for_search(output, "bm25")
    found = index.search("Which vehicle would not turn on when it was very cold?", 3)
    assert "car.txt" not in [Path(h.passage.document).name for h in found[:1]]


def test_a_reindex_embeds_only_new_and_changed_documents(docs: Path, tmp_path: Path) -> None:
    output = tmp_path / "index"
    encoder = CountingEncoder()
    first = build_index([docs], output, IndexSettings(encoder=encoder))
    assert (first.embedded_documents, first.embedded_passages) == (12, 12)
    assert len(encoder.embedded) == 12
    changed = "Mira's grey cat sleeps on the cold stone steps."
    (docs / "cat.txt").write_text(changed + "\n", "utf-8")
    (docs / "volcano.txt").unlink()
    encoder.embedded.clear()
    second = build_index([docs], output, IndexSettings(encoder=encoder))
    assert (second.embedded_documents, second.embedded_passages) == (1, 1)
    assert encoder.embedded == [changed]
    assert len(second.removed) == 1 and second.removed[0].endswith("volcano.txt")
    # Every kept vector still belongs to its passage after the removal shifted the rows.
    index = PassageIndex.open(output)
    assert index.vectors is not None and len(index.vectors) == 11
    for number in range(len(index)):
        expected = CountingEncoder().encode([index.passage(number).text])[0]
        assert np.array_equal(index.vectors.vectors[number], expected)
    encoder.embedded.clear()
    again = build_index([docs], output, IndexSettings(encoder=encoder))
    assert (again.embedded_documents, again.embedded_passages) == (0, 0) and not encoder.embedded
    # Damaged codes (or an index from before them) still lend their vectors; the new index
    # gets its codes back.
    (output / "embeddings.codes.npz").write_bytes(b"damaged")
    encoder.embedded.clear()
    mended = build_index([docs], output, IndexSettings(encoder=encoder))
    assert mended.embedded_passages == 0 and not encoder.embedded
    assert PassageIndex.open(output).vectors.codes is not None  # type: ignore[union-attr]
    # Another encoder reuses nothing.
    other = build_index([docs], output, IndexSettings(encoder=CountingEncoder("0" * 16)))
    assert other.embedded_passages == 11


def test_a_question_encoder_other_than_the_passages_is_refused(docs: Path, tmp_path: Path) -> None:
    output = tmp_path / "index"
    build_index([docs], output, IndexSettings(encoder=CountingEncoder()))
    index = PassageIndex.open(output)
    assert index.retriever == "hybrid"
    with pytest.raises(RetrievalError) as raised:
        index.use("dense", CountingEncoder("0123456789abcdef"))
    assert str(raised.value) == (
        "the question encoder counting (0123456789abcdef) is not the one the passages were "
        "embedded with (counting, feedfeedfeedfeed): use that encoder, or rebuild the index "
        "with this one"
    )
    index.use("dense", CountingEncoder())
    assert len(index.search("anything", 3)) == 3


def test_an_index_without_embeddings_answers_with_bm25_and_says_so(
    docs: Path, tmp_path: Path
) -> None:
    output = tmp_path / "index"
    build_index([docs], output)  # as an index built before semantic search
    index, note = open_for_search(output)
    assert note == (
        f"{output} holds no passage embeddings (built before semantic search, or with "
        "--encoder none): searching with BM25; rebuild it with qa-finetune index to add them"
    )
    assert index.retriever == "bm25"
    assert Path(index.search("Who designed the Ostra bridge?", 1)[0].passage.document).name == (
        "bridge.txt"
    )
    assert open_for_search(output, "bm25")[1] is None
    with pytest.raises(RetrievalError) as raised:
        open_for_search(output, "hybrid")
    assert str(raised.value) == (
        "--retriever hybrid needs passage embeddings, and this index has none: rebuild it "
        "with qa-finetune index, or use --retriever bm25"
    )


@pytest.mark.slow
def test_a_changed_encoder_folder_is_refused_in_one_line(
    docs: Path, tmp_path: Path, encoder: SentenceEncoder, minilm_dir: Path
) -> None:
    copy = tmp_path / "my-encoder"
    shutil.copytree(minilm_dir, copy)
    output = tmp_path / "index"
    result = runner.invoke(app, ["index", str(docs), "-o", str(output), "--encoder", str(copy)])
    assert result.exit_code == 0, result.output
    assert "embedded 12 passages of 12 documents" in result.output
    recorded = SentenceEncoder.load(str(copy)).info.fingerprint
    # The encoder's tokenizer settings change after indexing: questions would be embedded
    # differently from the passages.
    settings = copy / "tokenizer_config.json"
    settings.write_text(settings.read_text("utf-8").replace("}", ', "x": 1}', 1), "utf-8")
    changed = SentenceEncoder.load(str(copy)).info.fingerprint
    manifest_before = (output / MANIFEST).read_bytes()
    with pytest.raises(RetrievalError) as raised:
        open_for_search(output)
    assert str(raised.value) == (
        f"the question encoder {copy} ({changed}) is not the one the passages were embedded "
        f"with ({copy}, {recorded}): use that encoder, or rebuild the index with this one"
    )
    assert (output / MANIFEST).read_bytes() == manifest_before


def test_a_model_that_is_not_a_sentence_encoder_is_refused_before_indexing(
    docs: Path, tmp_path: Path
) -> None:
    tiny_model_dir = tmp_path / "qa-model"  # a model folder without modules.json
    tiny_model_dir.mkdir()
    (tiny_model_dir / "config.json").write_text('{"model_type": "bert"}', "utf-8")
    output = tmp_path / "index"
    result = runner.invoke(
        app, ["index", str(docs), "-o", str(output), "--encoder", str(tiny_model_dir)]
    )
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"error: {tiny_model_dir} is not a sentence encoder (no modules.json in "
        f"{tiny_model_dir}): pass a sentence-transformers model such as all-MiniLM-L6-v2"
    )
    assert not output.exists()


def test_a_question_alone_is_embedded_as_the_same_text_in_a_batch(
    encoder: SentenceEncoder,
) -> None:
    texts = [*QUESTIONS, DOCUMENTS["car.txt"], "Short.", "A" * 3000]
    in_batch = encoder.encode(texts)
    assert encoder._numpy_forward() is not None  # MiniLM is a plain BERT: the NumPy path
    for text, row in zip(texts, in_batch, strict=True):
        alone = encoder.encode([text])
        assert alone.shape == (1, 384) and alone.dtype == np.float32
        assert float(alone[0] @ row) > 1 - 1e-5
        assert float(np.abs(alone[0] - row).max()) < 1e-4


def test_a_question_alone_needs_neither_tensorflow_nor_transformers(
    encoder: SentenceEncoder,
) -> None:
    # A fresh encoder (not the process's cached one) whose first text is a lone question:
    # read from model.safetensors and tokenizer.json, the TF model never loaded.
    texts = [*QUESTIONS, "Short.", "A" * 3000]  # the last one truncated to the model's limit
    in_batch = encoder.encode(texts)  # TensorFlow, batched
    fresh = SentenceEncoder.fresh()
    for text, row in zip(texts, in_batch, strict=True):
        alone = fresh.encode([text])
        assert alone.shape == (1, 384) and alone.dtype == np.float32
        assert float(np.abs(alone[0] - row).max()) < 1e-4
    assert fresh._model is None and fresh._tokenizer is None
    assert fresh.info == encoder.info


def test_a_family_without_segment_ids_embeds_as_its_own_forward_pass(
    tmp_path: Path, family_tokenizer: Any, minilm_dir: Path
) -> None:
    # DistilBERT (like MPNet, all-mpnet-base-v2's family) takes no token_type_ids input.
    from families import save_tiny_model
    from transformers import TFAutoModel

    tokenizer = family_tokenizer("distilbert")
    folder = save_tiny_model("distilbert", tokenizer, tmp_path / "encoder")
    for name in ("modules.json", "sentence_bert_config.json"):
        shutil.copy(minilm_dir / name, folder / name)
    shutil.copytree(minilm_dir / "1_Pooling", folder / "1_Pooling")
    texts = ["The Ostra bridge opened in 1912.", "Who designed the bridge?"]
    vectors = SentenceEncoder.load(str(folder)).encode(texts)
    # Independently: the model's own hidden states, averaged under the mask, unit length.
    encoded = tokenizer(texts, padding=True, return_tensors="np")
    model = TFAutoModel.from_pretrained(str(folder))
    hidden = model(
        input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]
    ).last_hidden_state.numpy()
    mask = encoded["attention_mask"][..., None]
    pooled = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    assert vectors.shape == (2, pooled.shape[1])
    assert float(np.abs(vectors - pooled).max()) < 1e-5
