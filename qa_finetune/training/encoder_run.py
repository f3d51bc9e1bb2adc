"""``tune-encoder`` from data to a saved encoder: pairs and hard negatives, dense recall on the
held-out questions before, tuning, recall after, and the folder with its record.

Recall is measured as ``index`` would search: the held-out questions against the passages
of the held-out contexts alone (none of which trained the encoder), by cosine similarity.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.profile_cache import cpu_model
from qa_finetune.modeling.reference import resolve_model_dir
from qa_finetune.modeling.saving import save_sentence_encoder
from qa_finetune.modeling.sentence_encoder import SentenceEncoder
from qa_finetune.retrieval.bm25 import TextTokenizer
from qa_finetune.retrieval.training_pairs import PairSet, hard_negatives, question_pairs, recall_at
from qa_finetune.training.encoder_tuning import (
    EncoderTuner,
    TuningProgress,
    TuningSettings,
    tune,
)

RECALL_AT = (1, 5, 20)


class EncoderTuningError(QAFinetuneError):
    """The encoder cannot be tuned on the data given."""


@dataclass(frozen=True)
class EncoderRunRequest:
    """What to tune, on what, and where the tuned folder goes."""

    encoder: str
    output: Path
    settings: TuningSettings
    hard_negatives: int = 1
    max_words: int = 200


@dataclass
class EncoderRunHooks:
    """How the run reports: a line of text, a counter of hard-negative searches, each step."""

    say: Callable[[str], None]
    counter: Callable[[str, int], Callable[[int], None]] | None = None
    step: Callable[[TuningProgress], None] | None = None


def run_encoder_tuning(
    request: EncoderRunRequest,
    train_rows: Iterable[Mapping[str, Any]],
    validation_rows: Iterable[Mapping[str, Any]] | None,
    sources: dict[str, str],
    hooks: EncoderRunHooks,
) -> dict[str, Any]:
    """Tune ``request.encoder`` on ``train_rows`` and save it; returns the saved record."""
    found = question_pairs(train_rows, request.max_words)
    if not found.pairs:
        raise EncoderTuningError(
            f"no question with an answer in {sources.get('train', 'the training data')}: "
            "tuning pairs each question with the passage holding its answer"
        )
    held = question_pairs(validation_rows, request.max_words) if validation_rows else PairSet()
    hooks.say(
        f"pairs: {len(found.pairs):,} questions over {len(found.passages):,} passages"
        + (
            f" ({found.without_answer:,} without an answer left out)"
            if found.without_answer
            else ""
        )
    )
    overlap = _held_out_also_trained(found, held, hooks)
    base = SentenceEncoder.fresh(request.encoder)  # its own weights: the process cache stays
    counting = hooks.counter("hard negatives", len(found.pairs)) if hooks.counter else None
    negatives = hard_negatives(found, TextTokenizer(), request.hard_negatives, counting)
    with_negative = sum(1 for chosen in negatives if chosen)
    if request.hard_negatives:
        hooks.say(f"hard negatives (BM25): {with_negative:,} of {len(found.pairs):,} questions")
    before = _recall(base, held, hooks, "before")
    settings = request.settings
    tuner = EncoderTuner(
        base.model, base.tokenizer, base.info.pooling, base.info.max_length, settings,
        settings.total_steps(len(found.pairs)),
    )  # fmt: skip
    result = tune(tuner, found, negatives, hooks.step)
    # A new encoder object: its traced forward pass and NumPy copy start from the tuned weights.
    after = _recall(SentenceEncoder(base.model, base.tokenizer, base.info), held, hooks, "after")
    record = {
        "base_encoder": {"name": request.encoder, "fingerprint": base.info.fingerprint},
        "data": sources,
        "pairs": len(found.pairs),
        "passages": len(found.passages),
        "questions_with_hard_negative": with_negative,
        "settings": {**asdict(settings), "hard_negatives": request.hard_negatives,
                     "passage_words": request.max_words},
        "result": asdict(result),
        "held_out": {"questions": len(held.pairs), "passages": len(held.passages),
                     "passages_also_trained": overlap, "recall_before": before,
                     "recall_after": after},
        "machine": {"cpu": cpu_model(),
                    "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
    }  # fmt: skip
    folder = resolve_model_dir(request.encoder)
    save_sentence_encoder(base.model, base.tokenizer, folder, request.output, record)
    return record


def _held_out_also_trained(found: PairSet, held: PairSet, hooks: EncoderRunHooks) -> int:
    """How many held-out passages are training passages too, said when any: they make the
    recall after tuning look better than it is."""
    trained = set(found.passages)
    overlap = sum(1 for passage in held.passages if passage in trained)
    if overlap:
        hooks.say(
            f"warning: {overlap:,} of the {len(held.passages):,} held-out passages are also "
            "training passages: the recall after tuning is optimistic for them (hold out other "
            "contexts)"
        )
    return overlap


def _recall(
    encoder: SentenceEncoder, held: PairSet, hooks: EncoderRunHooks, when: str
) -> dict[str, float] | None:
    """Dense recall@k of the held-out pairs, said on one line; None without held-out pairs."""
    if not held.pairs:
        return None
    passages = encoder.encode(held.passages)
    questions = encoder.encode([pair.question for pair in held.pairs])
    found = recall_at(questions, passages, [pair.passage for pair in held.pairs], RECALL_AT)
    figures = " / ".join(f"{found[k]:.2f}" for k in RECALL_AT)
    hooks.say(
        f"recall@{'/'.join(map(str, RECALL_AT))} {when}: {figures} ({len(held.pairs):,} held-out "
        f"questions, {len(held.passages):,} passages)"
    )
    return {f"recall@{k}": round(found[k], 2) for k in RECALL_AT}
