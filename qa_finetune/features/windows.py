"""Question/context pairs -> overflowing strided windows of tokens.

The window settings (defaults, ``make_spec``) and their checks, and ``make_windows`` with its
array views (context mask, whitespace-trimmed offsets); the pair encoder is in
``features/pair_encoding``, answer labels and the ``map`` feature functions in
``features/labels``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from qa_finetune.config import PreprocessConfig
from qa_finetune.errors import QAFinetuneError
from qa_finetune.features.arrays import Ragged
from qa_finetune.features.pair_encoding import pair_encoder, pair_windows

# Tokenizers report "no limit" as a huge sentinel (int(1e30)); anything above this is not a cap.
_NO_LIMIT = 1_000_000


class PreprocessError(QAFinetuneError):
    """The window settings cannot hold the questions, or the tokenizer is unsuitable."""


@dataclass(frozen=True)
class WindowSpec:
    """How one tokenizer lays out question/context windows."""

    max_length: int
    stride: int
    question_first: bool  # (question, context) when padding on the right, else reversed

    def to_dict(self) -> dict[str, Any]:
        """The spec by name, as an export's ``qa_config.json`` holds it."""
        return asdict(self)

    @property
    def context_sequence_id(self) -> int:
        return 1 if self.question_first else 0

    @property
    def truncation(self) -> str:
        return "only_second" if self.question_first else "only_first"


def model_max_length(tokenizer: Any) -> int | None:
    """Most tokens the model takes per window, or None when the tokenizer sets no limit."""
    value = getattr(tokenizer, "model_max_length", None) or _NO_LIMIT
    return int(value) if value < _NO_LIMIT else None


def window_spec(tokenizer: Any, max_length: int, stride: int) -> WindowSpec:
    """Check the tokenizer, and that ``max_length`` is within what the model accepts."""
    if not getattr(tokenizer, "is_fast", False):
        raise PreprocessError(
            f"tokenizer {type(tokenizer).__name__} is not a fast tokenizer; offsets need one "
            "(use a model that ships tokenizer.json)"
        )
    model_max = model_max_length(tokenizer)
    if model_max is not None and max_length > model_max:
        # Capping silently would train on other windows than the recipe says.
        raise PreprocessError(
            f"max_length {max_length} is more than the {model_max} tokens this model takes "
            f"per window: set --max-length {model_max} or less"
        )
    if stride >= max_length:
        raise PreprocessError(
            f"stride {stride} must be smaller than max_length {max_length}; lower --stride"
        )
    return WindowSpec(max_length, stride, question_first=tokenizer.padding_side == "right")


# A model used without a run's config gets the config's own defaults.
DEFAULT_MAX_LENGTH = PreprocessConfig.max_length
DEFAULT_STRIDE = PreprocessConfig.stride


def default_max_length(tokenizer: Any) -> int:
    """``DEFAULT_MAX_LENGTH``, or less for a model that takes fewer tokens per window."""
    return min(DEFAULT_MAX_LENGTH, model_max_length(tokenizer) or DEFAULT_MAX_LENGTH)


def make_spec(tokenizer: Any, max_length: int, stride: int) -> WindowSpec:
    """Window settings, checked with the config rules so errors name the option."""
    PreprocessConfig(max_length=max_length, stride=stride)
    return window_spec(tokenizer, max_length, stride)


def question_room_fix(
    length: int, specials: int, spec: WindowSpec, model_max: int | None = None
) -> str | None:
    """None when a question of ``length`` tokens leaves room for more than ``stride`` context
    tokens per window (the rule for every window); otherwise the problem and its fix."""
    needed = length + specials + spec.stride + 1
    if needed <= spec.max_length:
        return None
    limit = model_max or _NO_LIMIT
    room = limit - length - specials
    if needed <= limit:
        fix = f"raise --max-length to at least {needed} or lower --stride"
    elif room > 1:
        fix = f"lower --stride below {room} with --max-length {limit}, or shorten it"
    else:
        fix = f"shorten it (this model takes at most {limit} tokens per window)"
    return (
        f"the question is {length} tokens, too long for windows of {spec.max_length} tokens "
        f"with stride {spec.stride}: {fix}"
    )


def check_question_room(
    question_lengths: Sequence[int],
    specials: int,
    spec: WindowSpec,
    model_max: int | None = None,
    labels: Sequence[str] | None = None,
) -> None:
    """Raise ``PreprocessError`` for the first question that breaks :func:`question_room_fix`,
    its message prefixed by its label (default: its number when there are several)."""
    longest = max(question_lengths, default=0)
    if question_room_fix(longest, specials, spec, model_max) is None:
        return  # the common case costs one max()
    for index, length in enumerate(question_lengths):
        problem = question_room_fix(length, specials, spec, model_max)
        if problem is None:
            continue
        if labels is not None:
            where = labels[index]
        else:
            where = f"question {index + 1}: " if len(question_lengths) > 1 else ""
        raise PreprocessError(where + problem)


@dataclass
class Windows:
    """One tokenized batch: model input columns as lists, plus array views for labelling."""

    # input_ids, attention_mask[, token_type_ids], offset_mapping: as the pair call gives them
    encoding: dict[str, list[Any]]
    sample_map: np.ndarray  # [windows] -> example index in the batch
    offsets: np.ndarray  # [windows, length, 2], context tokens trimmed of edge whitespace
    is_context: np.ndarray  # [windows, length] bool
    cls_index: np.ndarray  # [windows]


def _context_mask(
    special_masks: list[list[int]], question_tokens: np.ndarray, spec: WindowSpec
) -> np.ndarray:
    """Which tokens of each window are context, from its special-token mask.

    Truncation never touches the question, so in every window the question is exactly its
    first (question first) or last (context first) ``question_tokens`` ordinary tokens.
    """
    ordinary = Ragged.from_lists(special_masks).padded(fill=1) == 0
    seen = ordinary.cumsum(axis=1)
    if spec.question_first:
        return ordinary & (seen > question_tokens[:, None])
    context_tokens = seen[:, -1:] - question_tokens[:, None]
    return ordinary & (seen <= context_tokens)


# Every character that ``str.isspace`` calls whitespace lies at or below U+3000 (the
# ideographic space; a test checks all of Unicode), so a table one entry past it answers for a
# whole text at once: a loop over the characters in Python took a third of the time of
# windowing one short request.
_IS_SPACE = np.array([chr(code).isspace() for code in range(0x3002)])


def non_space_positions(text: str) -> np.ndarray:
    """Indices of the characters of ``text`` that are not whitespace (as ``str.isspace``)."""
    # UTF-32 gives one code point per character; a lone surrogate passes through as itself.
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return np.flatnonzero(~_IS_SPACE[np.minimum(codes, len(_IS_SPACE) - 1)])


def _trim_whitespace(
    offsets: np.ndarray, is_context: np.ndarray, contexts: list[str], owner: np.ndarray
) -> np.ndarray:
    """Context token offsets without whitespace at their edges.

    Sentencepiece-style tokenizers (XLNet, ALBERT) fold the space before a word into the
    word's token ("▁Denver" covers " Denver") and byte-level BPE gives tabs and newlines
    tokens of their own. An answer never starts or ends with whitespace, so labels and answer
    spans use each token's non-space characters; a whitespace-only token becomes zero-width,
    which alignment and the span search skip.
    """
    distinct = list(dict.fromkeys(contexts))
    where = {c: i for i, c in enumerate(distinct)}
    lengths = np.array([len(c) for c in distinct], dtype=np.int64)
    base = np.concatenate([[0], np.cumsum(lengths)])[[where[contexts[o]] for o in owner]]
    text = "".join(distinct)
    solid = non_space_positions(text)
    # For each character position: the first non-space at or after it, and the end of the
    # last non-space before it. Crossing into a neighbouring context is harmless: both are
    # clamped to the token's own span below.
    positions = np.arange(len(text) + 1)
    after = np.searchsorted(solid, positions)
    next_solid = np.append(solid, len(text))[after]
    solid_end = np.where(after > 0, np.append(0, solid + 1)[after], 0)
    # Other tokens' offsets point into the question: they are left as they are.
    start = np.where(is_context, offsets[..., 0], 0) + base[:, None]
    end = np.where(is_context, offsets[..., 1], 0) + base[:, None]
    new_start = np.minimum(next_solid[start], end)
    new_end = np.maximum(solid_end[end], new_start)
    trimmed = offsets.copy()
    trimmed[..., 0] = np.where(is_context, new_start - base[:, None], offsets[..., 0])
    trimmed[..., 1] = np.where(is_context, new_end - base[:, None], offsets[..., 1])
    return trimmed


def make_windows(batch: dict[str, list[Any]], tokenizer: Any, spec: WindowSpec) -> Windows:
    """Tokenize a batch of examples into overflowing, unpadded windows and their array views.

    Questions are stripped of outer whitespace (some SQuAD questions start with spaces that
    would eat window room).
    """
    encoder = pair_encoder(tokenizer)
    questions = [q.strip() for q in batch["question"]]
    distinct = {c: i for i, c in enumerate(dict.fromkeys(batch["context"]))}
    question_encodings = encoder.raw.encode_batch(questions, add_special_tokens=False)
    context_encodings = encoder.raw.encode_batch(list(distinct), add_special_tokens=False)
    ids = batch.get("id")
    check_question_room(
        [len(e.ids) for e in question_encodings],
        encoder.specials,
        spec,
        model_max_length(tokenizer),
        labels=[f"question {i}: " for i in ids] if ids and len(ids) > 1 else None,
    )
    windows: list[Any] = []
    owners: list[int] = []
    for example, (question, context) in enumerate(
        zip(question_encodings, batch["context"], strict=True)
    ):
        passage = context_encodings[distinct[context]]
        pair = pair_windows(
            encoder, question, passage, spec.max_length, spec.stride, spec.question_first
        )
        windows.extend(pair)
        owners.extend([example] * len(pair))
    sample_map = np.asarray(owners, dtype=np.int64)
    offsets = [w.offsets for w in windows]
    input_ids = [w.ids for w in windows]
    question_tokens = np.array([len(e.ids) for e in question_encodings], dtype=np.int64)
    is_context = _context_mask(
        [w.special_tokens_mask for w in windows], question_tokens[sample_map], spec
    )
    encoding: dict[str, list[Any]] = {
        "input_ids": input_ids,
        "attention_mask": [w.attention_mask for w in windows],
        "offset_mapping": offsets,
    }
    if "token_type_ids" in tokenizer.model_input_names:
        encoding["token_type_ids"] = [w.type_ids for w in windows]
    return Windows(
        encoding=encoding,
        sample_map=sample_map,
        offsets=_trim_whitespace(
            Ragged.from_pairs(offsets).padded(), is_context, batch["context"], sample_map
        ),
        is_context=is_context,
        cls_index=cls_indices(input_ids, tokenizer.cls_token_id),
    )


def cls_indices(input_ids: Sequence[Sequence[int]], cls_token_id: int | None) -> np.ndarray:
    """Position of the CLS token in each window (0 for tokenizers without one)."""
    if cls_token_id is None:
        return np.zeros(len(input_ids), dtype=np.int64)
    return np.array(
        [ids.index(cls_token_id) if cls_token_id in ids else 0 for ids in input_ids], dtype=np.int64
    )
