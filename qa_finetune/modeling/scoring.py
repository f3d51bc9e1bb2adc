"""Official SQuAD scores of a loaded model on prepared windows: used by training after each
epoch and by ``evaluate``, so the two cannot score differently."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from qa_finetune.config import InferenceConfig
from qa_finetune.decoding.no_answer_rule import NoAnswerRule
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


def feature_offsets(features: Any, length: int) -> np.ndarray:
    """``offset_mapping`` of cached features as int64 ``[F, length, 2]``, -1 outside context."""
    from qa_finetune.features.arrays import Ragged

    column = features.with_format("arrow")[:].column("offset_mapping")
    return Ragged.from_arrow(column).padded(width=length, fill=-1)


def rule_choice(predictions: Any, gold: Mapping[str, list[str]], mode: str) -> dict[str, Any]:
    """The no-answer rule and threshold ``gold``'s questions choose, as JSON-ready values:
    ``rule``, ``threshold``, ``compared`` (each candidate's F1 and AUC) and ``reason``."""
    from qa_finetune.decoding.no_answer_fit import choose_no_answer_rule, rule_size_warnings

    choice = choose_no_answer_rule(predictions, gold, mode)
    return {
        "rule": choice.rule.to_dict(),
        "threshold": choice.threshold,
        "compared": choice.compared,
        "reason": choice.reason,
        "warnings": rule_size_warnings(gold),
    }


def calibration_choice(
    predictions: Any, gold: Mapping[str, list[str]], rule_choice: Mapping[str, Any], source: str
) -> dict[str, Any]:
    """The confidence calibration ``gold``'s questions fit (``decoding.confidence_fit``),
    their answers decided by the rule they chose: ``{"calibration": ...}``, or ``{"error":
    ...}`` saying why these questions cannot fit one."""
    from qa_finetune.decoding.confidence import CalibrationError
    from qa_finetune.decoding.confidence_fit import answers_of, fit_calibration

    rule = NoAnswerRule.from_dict(rule_choice["rule"], source)
    threshold = float(rule_choice["threshold"])
    held = answers_of(predictions, gold, rule, threshold)
    try:
        calibration = fit_calibration(held, source)
    except CalibrationError as exc:
        return {"error": str(exc)}
    return with_runner_up(calibration, held, predictions, gold, threshold, source)


def with_runner_up(
    calibration: Any,
    held: Any,
    predictions: Any,
    gold: Mapping[str, list[str]],
    threshold: float,
    source: str,
) -> dict[str, Any]:
    """``{"calibration": ...}`` with its runner-up part (``decoding.runner_up_confidence``)
    when these questions fit one that beats the share of what is left; else without it, and
    ``runner_up_error`` saying why."""
    import dataclasses

    from qa_finetune.decoding.confidence import CalibrationError
    from qa_finetune.decoding.confidence_fit import confidence_of
    from qa_finetune.decoding.runner_up_confidence import fit_runner_up

    confidences = dict(zip(held.ids, confidence_of(calibration, held).tolist(), strict=True))
    abstained = {qid: bool(row["no_answer"]) for qid, row in zip(held.ids, held.rows, strict=True)}
    try:
        runner_up = fit_runner_up(predictions, gold, confidences, abstained, threshold, source)
    except CalibrationError as exc:
        return {"calibration": calibration.to_dict(), "runner_up_error": str(exc)}
    return {"calibration": dataclasses.replace(calibration, runner_up=runner_up).to_dict()}


def v2_choices(
    predictions: Any, gold: Mapping[str, list[str]], rule_mode: str, source: str
) -> dict[str, Any]:
    """The best threshold here, the answerability figures, and the rule and calibration
    these questions choose."""
    from qa_finetune.decoding.answerability import answerability
    from qa_finetune.decoding.threshold import tune_no_answer_threshold

    threshold, tuned_f1 = tune_no_answer_threshold(predictions, gold)
    choice = rule_choice(predictions, gold, rule_mode)
    return {
        "tuned_no_answer_threshold": threshold,
        "tuned_f1": tuned_f1,
        **answerability(predictions, gold),
        "no_answer_rule_choice": choice,
        "calibration_choice": calibration_choice(predictions, gold, choice, source),
    }


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
    (``decoding.no_answer_fit``), and ``calibration_choice``: the confidence calibration they
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
        result.update(v2_choices(predictions, gold, rule_mode, source))
    loss = qa_loss(start, end, features)
    if loss is not None:
        result["eval_loss"] = loss
    result["predictions"] = predictions
    return result
