"""A question/context pair encoded the way the tokenizer's pair call does, in parts.

Each question and each distinct context is encoded once; the context is cut into overlapping
chunks and each (question, chunk) pair gets its special tokens from the post-processor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qa_finetune.libraries.compat import tokenizer_cache


@dataclass(frozen=True)
class PairEncoder:
    """The Rust tokenizer, without padding or truncation, and how it cuts contexts.

    A pair encoding is the two texts encoded separately, the truncated one cut into
    overlapping chunks, and each (question, chunk) pair given its special tokens and type ids
    by the post-processor. Doing these steps here lets each distinct context be encoded once,
    however many questions ask about it (SQuAD has about five per paragraph); the windows are
    identical to the tokenizer's own pair call (a test compares them).
    """

    raw: Any  # encodes single texts with no post-processing at all
    backend: Any  # the full tokenizer, whose post-processor joins a pair
    specials: int
    direction: str


def pair_encoder(tokenizer: Any) -> PairEncoder:
    """Build (once per tokenizer) the encoder that makes windows."""
    cache = tokenizer_cache(tokenizer)
    if "encoder" not in cache:
        from tokenizers import Tokenizer

        backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
        backend.no_padding()
        backend.no_truncation()
        # Encoding a single text still runs the post-processor, and byte-level BPE's one
        # trims leading spaces from offsets. Post-processing the pair later would trim them
        # a second time (one character late), so the parts are encoded with none.
        raw = Tokenizer.from_str(backend.to_str())
        raw.post_processor = None
        cache["encoder"] = PairEncoder(
            raw,
            backend,
            tokenizer.num_special_tokens_to_add(pair=True),
            getattr(tokenizer, "truncation_side", "right"),
        )
    return cache["encoder"]


def pair_windows(
    encoder: PairEncoder,
    question: Any,
    passage: Any,
    max_length: int,
    stride: int,
    question_first: bool,
) -> list[Any]:
    """All windows of one (question, context) pair, specials and type ids included."""
    from tokenizers import Encoding

    room = max_length - len(question.ids) - encoder.specials
    chunk = Encoding.merge([passage], growing_offsets=False)  # a copy: truncate works in place
    chunk.truncate(room, stride=stride, direction=encoder.direction)
    windows = []
    # Only the main encoding of a post-processed pair has template type ids for sure, so
    # every chunk is post-processed on its own.
    for part in [chunk, *chunk.overflowing]:
        first, second = (question, part) if question_first else (part, question)
        windows.append(encoder.backend.post_process(first, second, add_special_tokens=True))
    return windows
