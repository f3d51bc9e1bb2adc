"""What a saved BM25 score matrix must hold before it is searched.

``bm25s`` reads its files as they are: a settings file that is a list or names an unknown
type, a vocabulary nested 100,000 levels deep, a score array swapped for another or an empty
index-pointer file fail inside the library (a ``TypeError``, a ``RecursionError``, a shape
error at the first question, an ``EOFError``). These checks find such damage when the index
is opened, each as one sentence naming the file, for the "rebuild the index" line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files.nesting import check_json_depth

SETTINGS_FILE = "params.index.json"
VOCABULARY_FILE = "vocab.index.json"
SCORES_FILE = "data.csc.index.npy"
PASSAGES_FILE = "indices.csc.index.npy"
POINTERS_FILE = "indptr.csc.index.npy"


# What bm25s writes in params.index.json: its constructor's settings, the version, the count.
SAVED_SETTINGS = frozenset(
    {"k1", "b", "delta", "method", "idf_method", "dtype", "int_dtype", "backend"}
    | {"num_docs", "version"}
)


class DamagedScores(QAFinetuneError):
    """A file of a saved score matrix does not hold what ``bm25s`` wrote."""


def check_saved_files(folder: Path) -> None:
    """Each file as ``bm25s`` writes it: the settings an object, neither JSON file nested
    deeper than the parser's recursion can follow, each array a readable NumPy file (only
    its header is read: the arrays are memory-mapped)."""
    folder = Path(folder)
    for name in (SETTINGS_FILE, VOCABULARY_FILE, SCORES_FILE, PASSAGES_FILE, POINTERS_FILE):
        if not (folder / name).is_file():
            raise DamagedScores(f"{name} is missing")
    for name in (SETTINGS_FILE, VOCABULARY_FILE):
        text = (folder / name).read_bytes()
        try:
            check_json_depth(text, name, DamagedScores)
        except DamagedScores:
            raise DamagedScores(f"{name} nests too deep") from None
    try:
        settings = json.loads((folder / SETTINGS_FILE).read_bytes())
    except ValueError:  # not JSON, not UTF-8, an integer of thousands of digits
        settings = None
    if not isinstance(settings, dict):
        raise DamagedScores(f"{SETTINGS_FILE} is not an object of settings")
    _check_settings(settings)
    for name in (SCORES_FILE, PASSAGES_FILE, POINTERS_FILE):
        try:
            np.load(folder / name, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError):
            raise DamagedScores(f"{name} is cut short or not an array") from None


def _check_settings(settings: dict[str, Any]) -> None:
    """The settings ``bm25s`` saves, of values it can search with: those read at a question
    (the arrays' types, the backend) would fail there, not here."""
    unknown = sorted(set(settings) - SAVED_SETTINGS)
    if unknown:
        raise DamagedScores(
            f"{SETTINGS_FILE} holds settings bm25s does not save ({unknown[0][:40]})"
        )
    for key, kinds in (("dtype", "f"), ("int_dtype", "iu")):
        kind = _dtype_kind(settings.get(key, "float32" if kinds == "f" else "int32"))
        if not kind or kind not in kinds:
            raise DamagedScores(f"{SETTINGS_FILE}: its {key} is not one bm25s saves")
    # The index is built with bm25s's NumPy backend; "auto" runs on it where numba is absent.
    if settings.get("backend", "numpy") not in ("numpy", "auto"):
        raise DamagedScores(f"{SETTINGS_FILE}: its backend is not one bm25s saves")


def _dtype_kind(value: Any) -> str:
    """The kind of NumPy type ``value`` names ("f", "i", "u", ...), "" if it names none."""
    try:
        return np.dtype(value).kind if isinstance(value, str) else ""
    except TypeError:
        return ""


def check_loaded(model: Any) -> None:
    """The loaded matrix agrees with itself: a document count, a vocabulary of term numbers
    within the matrix, and three arrays of one compressed-column matrix."""
    documents = model.scores.get("num_docs")
    if isinstance(documents, bool) or not isinstance(documents, int) or documents < 0:
        raise DamagedScores(f"{SETTINGS_FILE} gives no document count")
    scores, passages, pointers = (model.scores[k] for k in ("data", "indices", "indptr"))
    _check_array(scores, SCORES_FILE, "f")
    _check_array(passages, PASSAGES_FILE, "iu")
    _check_array(pointers, POINTERS_FILE, "iu")
    if len(pointers) == 0 or int(pointers[0]) != 0:
        raise DamagedScores(f"{POINTERS_FILE} does not start at 0")
    if np.any(pointers[1:] < pointers[:-1]):
        raise DamagedScores(f"{POINTERS_FILE} goes backwards")
    counted = int(pointers[-1])
    for array, name in ((scores, SCORES_FILE), (passages, PASSAGES_FILE)):
        if len(array) != counted:
            raise DamagedScores(
                f"{name} holds {len(array)} values where {POINTERS_FILE} counts {counted}"
            )
    _check_vocabulary(model.vocab_dict, len(pointers))


def _check_array(array: Any, name: str, kinds: str) -> None:
    """A one-dimensional array of the kind written (``f``: floats, ``iu``: integers)."""
    if not isinstance(array, np.ndarray) or array.ndim != 1 or array.dtype.kind not in kinds:
        raise DamagedScores(f"{name} is not the array saved with the index")


def _check_vocabulary(vocabulary: Any, pointers: int) -> None:
    """Terms to term numbers, each a column of the matrix (``pointers`` - 1 of them; the
    empty term, which no question holds, may number one more)."""
    if not isinstance(vocabulary, dict):
        raise DamagedScores(f"{VOCABULARY_FILE} is not an object of terms")
    numbers = list(vocabulary.values())
    # Types compared exactly (a bool is an int subclass) and in C: a vocabulary may hold
    # millions of terms, and this runs whenever an index is opened.
    if numbers and (
        set(map(type, numbers)) != {int} or min(numbers) < 0 or max(numbers) >= pointers
    ):
        raise DamagedScores(f"{VOCABULARY_FILE} holds a term number outside the matrix")
