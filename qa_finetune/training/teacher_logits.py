"""The teacher's start/end logits of every training window, computed once and cached beside
the features (``<features>/teacher-logits/<key>/``), so a second student or a resumed run
does not run the teacher again.

The key hashes the teacher's weights and config (``teacher.teacher_digest``) with the
features' fingerprints: a changed teacher or changed features get a folder of their own, and
so are computed again. Rows follow the windows' order in the features (the run's training
windows, then its replay windows); batches find theirs by a window index column, so any
epoch order lines up. Logits are stored as float16 to halve the files: they are small
numbers (a few tens at most), which float16 keeps to about three significant digits, far
finer than the differences between positions that distillation learns from.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.files import write_json
from qa_finetune.files.staged_folders import staged_folder
from qa_finetune.modeling.loading import load_qa_model
from qa_finetune.modeling.predict import LOGIT_FILL, predict_features
from qa_finetune.training.teacher import Teacher, teacher_digest
from qa_finetune.training.tf_data import window_lengths
from qa_finetune.training.token_bridge import TokenBridge, describe

log = logging.getLogger(__name__)

# Bump when the stored layout changes, so older caches are computed again.
CACHE_FORMAT = 1
CACHE_DIR = "teacher-logits"
_INFO = "teacher.json"
# Windows per teacher call: bounds the padded float32 logits held at once.
_CHUNK = 2048


@dataclass(frozen=True)
class TeacherLogits:
    """Every window's logits, window after window (float16; read from memory maps)."""

    start: np.ndarray  # [all windows' tokens]
    end: np.ndarray
    offsets: np.ndarray  # [windows + 1]: window i's logits are [offsets[i], offsets[i + 1])
    folder: Path
    reused: bool  # read from the cache (the teacher did not run)

    def padded(self, index: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The logits of windows ``index``, ``[len(index), width]`` float16, ``LOGIT_FILL``
        after each window's end (the batch's padding)."""
        start = np.full((len(index), width), LOGIT_FILL, dtype=np.float16)
        end = np.full((len(index), width), LOGIT_FILL, dtype=np.float16)
        for row, window in enumerate(np.asarray(index, dtype=np.int64)):
            begin, stop = self.offsets[window], self.offsets[window + 1]
            start[row, : stop - begin] = self.start[begin:stop]
            end[row, : stop - begin] = self.end[begin:stop]
        return start, end


def cache_key(digest: str, fingerprints: Sequence[str], bridge: str | None = None) -> str:
    """The cache folder's name: the teacher's digest, the features' fingerprints, the format
    (and the token bridge, where the teacher reads the windows through one)."""
    parts: dict[str, Any] = {"format": CACHE_FORMAT, "teacher": digest}
    parts["features"] = list(fingerprints)
    if bridge is not None:
        parts["bridge"] = bridge
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _offsets(windows: Sequence[Any]) -> np.ndarray:
    lengths = np.concatenate([window_lengths(features) for features in windows])
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _chunk_logits(
    model: Any, chunk: Any, batch_size: int, bridge: TokenBridge | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and end logits ``[windows, width]`` of ``chunk`` and the mask of the positions
    that are the student's tokens (through ``bridge``: the teacher's layout, less the
    separator it adds)."""
    lengths = window_lengths(chunk)
    if bridge is None:
        start, end = predict_features(model, chunk, batch_size)
        return start, end, np.arange(start.shape[1]) < lengths[:, None]
    columns, added = bridge.teacher_columns(chunk)
    start, end = predict_features(model, columns, batch_size)
    teacher_lengths = lengths + (added >= 0)
    return start, end, bridge.student_mask(teacher_lengths, added, start.shape[1])


def _run_teacher(
    teacher: Teacher, windows: Sequence[Any], batch_size: int, bridge: TokenBridge | None
) -> tuple[np.ndarray, np.ndarray]:
    """The teacher's logits of every window, flat (float16), in the windows' order."""
    model = load_qa_model(teacher.model_dir)
    starts, ends = [], []
    for features in windows:
        for begin in range(0, len(features), _CHUNK):
            chunk = features.select(range(begin, min(begin + _CHUNK, len(features))))
            start, end, inside = _chunk_logits(model, chunk, batch_size, bridge)
            starts.append(start[inside].astype(np.float16))
            ends.append(end[inside].astype(np.float16))
    return np.concatenate(starts), np.concatenate(ends)


def _read(folder: Path, offsets: np.ndarray, key: str) -> TeacherLogits | None:
    """The cached logits in ``folder`` when they are complete and fit the windows."""
    try:
        info = json.loads((folder / _INFO).read_text(encoding="utf-8"))
        start = np.load(folder / "start.npy", mmap_mode="r")
        end = np.load(folder / "end.npy", mmap_mode="r")
    except (OSError, ValueError):
        return None
    expected = (key, len(offsets) - 1, int(offsets[-1]))
    found = (info.get("key"), info.get("windows"), len(start))
    if found != expected or len(end) != len(start):
        log.warning("teacher logits in %s do not fit the windows: computing them again", folder)
        return None
    return TeacherLogits(start, end, offsets, folder, reused=True)


def teacher_logits(
    teacher: Teacher,
    windows: Sequence[Any],
    fingerprints: Sequence[str],
    cache_root: Path,
    batch_size: int,
    bridge: TokenBridge | None = None,
) -> TeacherLogits:
    """The logits of ``windows`` (datasets of training windows, in the order the window
    index counts them), read from ``cache_root/teacher-logits/<key>`` or computed there;
    through ``bridge`` where the teacher's tokenizer has other ids."""
    digest = teacher_digest(teacher)
    key = cache_key(digest, fingerprints, describe(bridge))
    folder = Path(cache_root) / CACHE_DIR / key
    offsets = _offsets(windows)
    cached = _read(folder, offsets, key)
    if cached is not None:
        log.info("teacher logits: reused %s", folder)
        return cached
    log.info("teacher logits: running %s over %d windows", teacher.name, len(offsets) - 1)
    start, end = _run_teacher(teacher, windows, batch_size, bridge)
    with staged_folder(folder) as staging:
        np.save(staging / "start.npy", start)
        np.save(staging / "end.npy", end)
        info = {"key": key, "windows": len(offsets) - 1, "teacher_sha256": digest}
        write_json(staging / _INFO, {**info, "teacher": str(teacher.model_dir)})
    return TeacherLogits(start, end, offsets, folder, reused=False)
