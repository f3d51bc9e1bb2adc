"""Vectors of a fixed list of texts kept between runs (``evaluate --open`` embeds every
context of its file each time otherwise: minutes on a CPU for SQuAD dev's 2,067 paragraphs).

The file is named after the encoder's fingerprint and a hash of the texts in order, under
``$XDG_CACHE_HOME/qa-finetune/embeddings`` (``~/.cache`` by default); a cache file that
cannot be read is embedded again and replaced.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from qa_finetune.files import staged_file
from qa_finetune.retrieval.embedding import Encoder


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qa-finetune" / "embeddings"


def encode_cached(
    encoder: Encoder, texts: Sequence[str], progress: Callable[[int], None] | None = None
) -> np.ndarray:
    """``encoder.encode(texts)``, read from the cache when these texts were embedded by this
    encoder before."""
    digest = hashlib.sha256(encoder.info.fingerprint.encode())
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
    path = cache_folder() / f"{encoder.info.fingerprint}-{digest.hexdigest()[:24]}.npy"
    try:
        found = np.load(path, allow_pickle=False)
        if found.shape == (len(texts), encoder.info.dimension):
            return found.astype(np.float32, copy=False)
    except (OSError, ValueError, EOFError):
        pass
    vectors = encoder.encode(texts, progress)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with staged_file(path) as out:
            np.save(out, vectors)
    except OSError:
        pass  # a cache that cannot be written only costs the next run the embedding
    return vectors
