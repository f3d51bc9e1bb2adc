"""The cache of an evaluation's context vectors: a second run with the same texts and
encoder reads them back without embedding; other texts or another encoder embed again; an
unreadable cache file is embedded again and replaced."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qa_finetune.modeling.embedding_cache import cache_folder, encode_cached
from qa_finetune.retrieval.embedding import EncoderInfo, normalise


class Recording:
    def __init__(self, fingerprint: str = "abcdabcdabcdabcd") -> None:
        self.info = EncoderInfo("recording", fingerprint, 4, "mean", 16)
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str], progress: Any = None) -> np.ndarray:
        self.calls.append(list(texts))
        return normalise(np.arange(1, 4 * len(texts) + 1, dtype=np.float32).reshape(-1, 4))


def test_vectors_are_read_back_for_the_same_texts_and_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    encoder = Recording()
    first = encode_cached(encoder, ["a", "b"])
    again = encode_cached(encoder, ["a", "b"])
    assert encoder.calls == [["a", "b"]] and np.array_equal(first, again)
    encode_cached(encoder, ["b", "a"])  # another order is another collection
    other = Recording("0000000000000000")
    encode_cached(other, ["a", "b"])
    assert len(encoder.calls) == 2 and len(other.calls) == 1
    assert cache_folder() == tmp_path / "qa-finetune" / "embeddings"
    for path in cache_folder().glob("*.npy"):
        path.write_bytes(b"damaged")
    encode_cached(encoder, ["a", "b"])
    assert len(encoder.calls) == 3
    assert encode_cached(encoder, ["a", "b"]).shape == (2, 4) and len(encoder.calls) == 3
