"""Official SQuAD scores of a loaded model on prepared windows: used by training after each
epoch and by ``evaluate``, so the two cannot score differently."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from qa_finetune.calibration.held_out import held_out_choices
from qa_finetune.calibration.no_answer_rule import NoAnswerRule
from qa_finetune.config import InferenceConfig
from qa_finetune.metrics import squad_v1, squad_v2
from qa_finetune.modeling.predict import predict_features


def references(examples: Any) -> dict[str, list[str]]:
    """``{id: gold answer texts}`` from validated examples (list of dicts or a Dataset)."""
    if hasattr(examples, "column_names"):
        pairs = zip(examples["id"], examples["answers"], strict=True)
        return {example_id: list(answers["text"]) for example_id, answers in pairs}
    return {e["id"]: list(e["answers"]["text"]) for e in examples}


def score(
    predictions: Mapping[str, str],
    gold: Mapping[str, list[str]],
    allow_no_answer: bool,
    null_score_diff: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Official scores with ``exact_match`` and ``f1`` keys for both SQuAD versions."""
    if not allow_no_answer:
        return squad_v1(predictions, gold)
    scores = squad_v2(predictions, gold, null_score_diff)
    return {"exact_match": scores.pop("exact"), **scores}


def _columns(examples: Any) -> list[str]:
    """The column names of a Dataset, or of the first of a list of records."""
    if hasattr(examples, "column_names"):
        return list(examples.column_names)
    return list(examples[0]) if len(examples) else []


def feature_offsets(features: Any, length: int) -> np.ndarray:
    """``offset_mapping`` of cached features as int64 ``[F, length, 2]``, -1 outside context."""
    from qa_finetune.features.arrays import Ragged

    column = features.with_format("arrow")[:].column("offset_mapping")
    return Ragged.from_arrow(column).padded(width=length, fill=-1)


def qa_loss(start: np.ndarray, end: np.ndarray, features: Any) -> float | None:
    """Mean cross-entropy of start and end labels (the Keras QA loss), when labels exist."""
    if "start_positions" not in features.column_names:
        return None
    losses = []
    for logits, column in ((start, "start_positions"), (end, "end_positions")):
        labels = np.asarray(list(features[column]), dtype=np.int64)
        values = logits.astype(np.float64)
        peak = values.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(values - peak).sum(axis=1)) + peak[:, 0]
        losses.append(log_norm - values[np.arange(len(labels)), labels])
    return float(np.mean((losses[0] + losses[1]) / 2)) if len(start) else None


def predict_and_decode(
    model: Any,
    tokenizer: Any,
    examples: Any,
    features: Any,
    inference_config: InferenceConfig,
    rule: NoAnswerRule | None = None,
    passes: int | None = None,
    watch: Any = None,
    **decoding: Any,
) -> tuple[Any, np.ndarray, np.ndarray]:
    """The model's start/end logits for ``features`` and their decoded ``Predictions``
    (n-best, null differences, no-answer scores) for ``examples``; ``decoding``: more
    options of ``postprocess_predictions``."""
    from qa_finetune.decoding.spans import postprocess_predictions

    pad = getattr(tokenizer, "pad_token_id", None)
    start, end = predict_features(
        model, features, inference_config.batch_size, pad_token_id=pad, passes=passes, watch=watch
    )
    predictions = postprocess_predictions(
        list(examples["id"]),
        list(examples["context"]),
        list(features["example_id"]),
        start,
        end,
        feature_offsets(features, start.shape[1]),
        cls_index=np.asarray(list(features["cls_index"]), dtype=np.int64),
        n_best=inference_config.n_best,
        max_answer_length=inference_config.max_answer_length,
        rule=rule,
        **decoding,
    )
    return predictions, start, end


def evaluate_loaded(
    model: Any,
    tokenizer: Any,
    examples: Any,
    features: Any,
    inference_config: InferenceConfig,
    allow_no_answer: bool,
    rule: NoAnswerRule | None = None,
    rule_mode: str = "auto",
    passes: int | None = None,
    source: str = "the validation data",
    watch: Any = None,
) -> dict[str, Any]:
    """Score a loaded model on prepared evaluation ``features`` of ``examples`` (Datasets).

    Returns the official scores (``exact_match``, ``f1``, ``total``, ``missing``; v2
    breakdowns), ``eval_loss`` when the features carry labels, and ``predictions`` (the
    ``decoding.spans.Predictions``). Questions abstain by ``rule`` (default: the null-score
    gap). v2 also gets the best threshold here, the answerability figures and
    ``no_answer_rule_choice``: the rule (of ``rule_mode``) these questions would choose
    (``calibration.no_answer_rule``), and ``calibration_choice``: the confidence calibration they
    fit (``source`` names them). Used by ``evaluate`` and by training after each validation.
    ``passes``: batches run at once (``predict_features``; None: as the cores were shared);
    ``watch``: told each pass's seconds (``predict_features``).
    """
    predictions, start, end = predict_and_decode(
        model,
        tokenizer,
        examples,
        features,
        inference_config,
        rule,
        passes,
        watch,
        allow_no_answer=allow_no_answer,
        no_answer_threshold=inference_config.no_answer_threshold,
    )
    null_diff = predictions.no_answer_score if allow_no_answer else None
    gold = references(examples)
    result = score(predictions.answers, gold, allow_no_answer, null_diff)
    if allow_no_answer:
        documents = len(set(examples["title"])) if "title" in _columns(examples) else None
        result.update(held_out_choices(predictions, gold, rule_mode, source, documents))
    loss = qa_loss(start, end, features)
    if loss is not None:
        result["eval_loss"] = loss
    result["predictions"] = predictions
    return result
