"""The dense half of search without a model: vector search against brute force, fusion
deterministic and independent of order, pooling, the embeddings file checked when opened,
and what makes a folder a sentence encoder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from qa_finetune.retrieval import vectors
from qa_finetune.retrieval.bm25 import RetrievalError
from qa_finetune.retrieval.embedding import (
    EncoderInfo,
    normalise,
    pool,
    sentence_config,
)
from qa_finetune.retrieval.fusion import best, reciprocal_rank_fusion, weighted_fusion

INFO = EncoderInfo("test-encoder", "0123456789abcdef", 16, "mean", 64)


def _unit(rows: int, seed: int = 0) -> np.ndarray:
    return normalise(np.random.default_rng(seed).standard_normal((rows, 16)))


def test_exact_search_is_brute_force_best_first_ties_to_the_lower_number() -> None:
    stored = _unit(300)
    stored[7] = stored[200]  # a tie: passage 7 must come before 200
    search = vectors.VectorSearch(stored, INFO)
    for query in _unit(20, seed=1):
        expected = sorted(range(300), key=lambda n: (-float(stored[n] @ query), n))[:10]
        assert [n for n, _ in search.top(query, 10)] == expected
    found = search.top(stored[200], 2)
    assert [n for n, _ in found] == [7, 200]
    assert found[0][1] == pytest.approx(1.0, abs=1e-6)
    assert len(search.top(stored[0], 1000)) == 300


def test_the_graph_search_finds_the_exact_top_on_a_small_set() -> None:
    pytest.importorskip("faiss")
    stored = _unit(500)
    search = vectors.VectorSearch(stored, INFO, vectors.build_graph(stored))
    exact = vectors.VectorSearch(stored, INFO)
    for query in _unit(10, seed=2):
        found, expected = search.top(query, 5), exact.top(query, 5)
        assert [n for n, _ in found] == [n for n, _ in expected]
        assert [s for _, s in found] == pytest.approx([s for _, s in expected], abs=1e-6)


def test_weighted_fusion_is_deterministic_and_order_independent() -> None:
    bm25 = {3: 10.0, 1: 4.0, 8: 2.0}
    dense = {8: 0.9, 1: 0.5, 5: 0.3}
    fused = weighted_fusion(bm25, dense, 10.0, 10)
    # 3: 10, 8: 2 + 9 = 11, 1: 4 + 5 = 9, 5: 3
    assert fused == [(8, 11.0), (3, 10.0), (1, 9.0), (5, 3.0)]
    reversed_order = weighted_fusion(
        dict(reversed(bm25.items())), dict(reversed(dense.items())), 10.0, 10
    )
    assert reversed_order == fused
    assert weighted_fusion(bm25, dense, 10.0, 2) == fused[:2]
    # Equal fused scores: the lower passage number first, whatever the input order.
    assert weighted_fusion({4: 1.0, 2: 1.0}, {}, 5.0, 2) == [(2, 1.0), (4, 1.0)]
    assert weighted_fusion({2: 1.0, 4: 1.0}, {}, 5.0, 2) == [(2, 1.0), (4, 1.0)]


def test_reciprocal_rank_fusion_counts_ranks_only() -> None:
    fused = reciprocal_rank_fusion([[1, 2, 3], [3, 1]], 3, constant=60)
    assert [n for n, _ in fused] == [1, 3, 2]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    assert reciprocal_rank_fusion([[3, 1], [1, 2, 3]], 3, constant=60) == fused
    assert best({5: 1.0, 2: 1.0, 9: 3.0}, 2) == [(9, 3.0), (2, 1.0)]


def test_mean_pooling_leaves_padding_out_and_normalises() -> None:
    hidden = np.array([[[1.0, 0.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    pooled = pool(hidden, mask, "mean")
    assert pooled == pytest.approx(np.array([[2.0, 2.0]]) / np.sqrt(8.0))
    assert pool(hidden, mask, "cls") == pytest.approx(np.array([[1.0, 0.0]]))
    assert pool(hidden, mask, "max") == pytest.approx(np.array([[0.6, 0.8]]))


def _write_sentence_folder(folder: Path, modules: object, pooling: dict | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "modules.json").write_text(json.dumps(modules), "utf-8")
    if pooling is not None:
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling), "utf-8")
    return folder


MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
]


def test_a_sentence_encoder_folder_and_folders_that_are_not(tmp_path: Path) -> None:
    good = _write_sentence_folder(tmp_path / "good", MODULES, {"pooling_mode_mean_tokens": True})
    assert sentence_config(good, "good").pooling == "mean"
    assert sentence_config(good, "good").max_length == 256
    qa_model = tmp_path / "qa-run"
    qa_model.mkdir()
    with pytest.raises(RetrievalError) as raised:
        sentence_config(qa_model, "qa-run")
    assert str(raised.value) == (
        f"qa-run is not a sentence encoder (no modules.json in {qa_model}): pass a "
        "sentence-transformers model such as all-MiniLM-L6-v2"
    )
    no_pooling = _write_sentence_folder(tmp_path / "no-pooling", MODULES[:1], None)
    with pytest.raises(RetrievalError) as raised:
        sentence_config(no_pooling, "no-pooling")
    assert str(raised.value) == (
        "no-pooling is not a sentence encoder (modules.json names no Transformer and Pooling "
        "modules): pass a sentence-transformers model such as all-MiniLM-L6-v2"
    )
    odd = _write_sentence_folder(tmp_path / "odd", MODULES, {"pooling_mode_weightedmean": True})
    with pytest.raises(RetrievalError) as raised:
        sentence_config(odd, "odd")
    assert str(raised.value) == (
        "odd pools its tokens in a way this version does not read "
        "(['pooling_mode_weightedmean']): pass a sentence encoder with mean, CLS or max pooling"
    )


def _saved(tmp_path: Path, rows: np.ndarray) -> tuple[Path, dict]:
    entry = {"encoder": INFO.to_dict(), **vectors.save(tmp_path, rows)}
    return tmp_path, entry


def test_saved_vectors_load_memory_mapped(tmp_path: Path) -> None:
    folder, entry = _saved(tmp_path, _unit(40))
    assert entry == {
        "encoder": INFO.to_dict(),
        "file": "embeddings.npy",
        "count": 40,
        "codes": "embeddings.codes.npz",
        "graph": None,
    }
    loaded = vectors.load(folder, entry, 40)
    assert isinstance(loaded.vectors, np.memmap) and loaded.info == INFO
    assert loaded.codes is not None and loaded.codes.words.shape == (1, 40)


@pytest.mark.parametrize(
    "damage",
    ["truncated", "zeros", "count", "not-npy", "missing", "encoder"],
)
def test_damaged_or_mismatched_embeddings_fail_in_one_line_and_change_nothing(
    tmp_path: Path, damage: str
) -> None:
    folder, entry = _saved(tmp_path, _unit(40))
    path = folder / "embeddings.npy"
    passages = 40
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
    elif damage == "zeros":
        np.save(path, np.zeros((40, 16), dtype=np.float32))
    elif damage == "count":
        passages = 41
    elif damage == "not-npy":
        path.write_bytes(b"not an array")
    elif damage == "missing":
        path.unlink()
    elif damage == "encoder":
        entry = {**entry, "encoder": {"name": "x"}}
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(RetrievalError) as raised:
        vectors.load(folder, entry, passages)
    message = str(raised.value)
    assert "\n" not in message
    assert message.endswith("rebuild it with qa-finetune index (nothing was changed)") or (
        message.endswith("is damaged: rebuild the index with qa-finetune index")
    )
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_binary_codes_are_the_signs_about_the_mean_packed_little_endian() -> None:
    rows = np.zeros((3, 70), dtype=np.float32)
    rows[0, [0, 63, 64, 69]] = 1.0
    rows[1, 1] = 1.0
    codes = vectors.BinaryCodes.of(rows)
    assert codes.centre.shape == (70,) and codes.centre[0] == pytest.approx(1 / 3)
    assert codes.words.shape == (2, 3) and codes.words.dtype == np.uint64
    assert codes.words[:, 0].tolist() == [1 | 1 << 63, 1 | 1 << 5]
    assert codes.words[:, 1].tolist() == [2, 0]
    assert codes.words[:, 2].tolist() == [0, 0]
    # The passages nearest by code: the row itself first, then the all-zero row.
    assert sorted(codes.nearest(rows[0], 2).tolist()) == [0, 2]
    assert sorted(codes.nearest(rows[0], 5).tolist()) == [0, 1, 2]


def _clustered(rows: int, clusters: int, seed: int) -> np.ndarray:
    """Unit vectors of dimension 128 around ``clusters`` centres (fixed by seed 0), as real
    embeddings gather by topic; 128 bits a code."""
    centres = np.random.default_rng(0).standard_normal((clusters, 128))
    rng = np.random.default_rng(seed)
    around = centres[rng.integers(0, clusters, rows)]
    return normalise(around + 0.8 * rng.standard_normal((rows, 128)))


def test_codes_search_is_exact_among_its_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = _clustered(3000, 30, seed=3)
    codes = vectors.BinaryCodes.of(stored)
    info = EncoderInfo("test-encoder", "0123456789abcdef", 128, "mean", 64)
    exact = vectors.VectorSearch(stored, info)
    coded = vectors.VectorSearch(stored, info, codes=codes)
    monkeypatch.setattr(vectors, "CODES_FROM", 0)
    monkeypatch.setattr(vectors, "RESCORED", 3000)  # every passage: the exact answer
    for query in _clustered(10, 30, seed=4):
        assert coded.top(query, 10) == exact.top(query, 10)
    monkeypatch.setattr(vectors, "RESCORED", 300)
    covered = 0
    for query in _clustered(40, 30, seed=5):
        expected = exact.top(query, 10)
        candidates = set(codes.nearest(query, 300).tolist())
        if {n for n, _ in expected} <= candidates:
            covered += 1
            assert coded.top(query, 10) == expected
        found = coded.top(query, 10)
        assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    assert covered >= 35, covered  # the codes' best 10% held the exact top 10 for most questions


def test_codes_are_used_only_from_codes_from_passages(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = _unit(200)
    codes = vectors.BinaryCodes.of(stored)
    monkeypatch.setattr(vectors, "RESCORED", 1)  # candidates too few to be exact
    query = _unit(1, seed=9)[0]
    exact = vectors.VectorSearch(stored, INFO).top(query, 5)
    monkeypatch.setattr(vectors, "CODES_FROM", 201)
    assert vectors.VectorSearch(stored, INFO, codes=codes).top(query, 5) == exact
    monkeypatch.setattr(vectors, "CODES_FROM", 200)
    assert len(vectors.VectorSearch(stored, INFO, codes=codes).top(query, 5)) == 5


def test_an_index_without_codes_is_searched_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, entry = _saved(tmp_path, _unit(60))
    (folder / "embeddings.codes.npz").unlink()
    older = {k: v for k, v in entry.items() if k != "codes"}  # written before the codes
    monkeypatch.setattr(vectors, "CODES_FROM", 0)
    loaded = vectors.load(folder, older, 60)
    assert loaded.codes is None
    query = _unit(1, seed=7)[0]
    assert loaded.top(query, 5) == vectors.VectorSearch(_unit(60), INFO).top(query, 5)


@pytest.mark.parametrize("damage", ["truncated", "not-zip", "missing", "count", "centre"])
def test_damaged_codes_fail_in_one_line_and_change_nothing(tmp_path: Path, damage: str) -> None:
    folder, entry = _saved(tmp_path, _unit(40))
    path = folder / "embeddings.codes.npz"
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "not-zip":
        path.write_bytes(b"not codes")
    elif damage == "missing":
        path.unlink()
    elif damage == "count":
        words = vectors.BinaryCodes.of(_unit(41)).words
        np.savez(path, words=words, centre=np.zeros(16, np.float32))
    elif damage == "centre":
        np.savez(path, words=vectors.BinaryCodes.of(_unit(40)).words, centre=np.zeros(3))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(RetrievalError) as raised:
        vectors.load(folder, entry, 40)
    assert str(raised.value) == (
        f"{path} is damaged or does not belong to this index: rebuild it with qa-finetune "
        "index (nothing was changed)"
    )
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_the_codes_nearest_are_the_smallest_distances_ties_to_the_lower_number() -> None:
    stored = _clustered(500, 5, seed=11)
    codes = vectors.BinaryCodes.of(stored)
    query = _clustered(1, 5, seed=12)[0]
    code = vectors._packed(query[None], codes.centre)[0]
    distance = sum(
        np.array([bin(int(w) ^ int(c)).count("1") for w in row])
        for row, c in zip(codes.words, code, strict=True)
    )
    for count in (1, 7, 50, 499):
        expected = sorted(range(500), key=lambda n: (distance[n], n))[:count]
        assert codes.nearest(query, count).tolist() == sorted(expected)
