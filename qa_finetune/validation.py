"""Validation during training: real post-processing, official SQuAD scores and the loss."""

from __future__ import annotations

from typing import Any

import numpy as np

from qa_finetune.config import Config
from qa_finetune.metrics import squad_v1, squad_v2
from qa_finetune.postprocess import offsets_to_array, postprocess_predictions


def qa_loss(
    start_logits: np.ndarray, end_logits: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> float:
    """Mean of start and end cross-entropy, as the transformers TF QA models compute it."""

    def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(shifted).sum(axis=1))
        return log_norm - shifted[np.arange(len(labels)), labels]

    return float((cross_entropy(start_logits, starts) + cross_entropy(end_logits, ends)).mean() / 2)


def validation_scores(model: Any, prepared: Any, config: Config) -> dict[str, Any]:
    """EM, F1 (v2: HasAns/NoAns too) and loss of ``model`` on the prepared validation split."""
    from qa_finetune.infer import predict_features

    features, examples = prepared.validation, prepared.validation_examples
    start_logits, end_logits = predict_features(model, features, config.inference.batch_size)
    scores: dict[str, Any] = {}
    if "start_positions" in features.column_names:
        scores["eval_loss"] = qa_loss(
            start_logits,
            end_logits,
            np.asarray(features["start_positions"]),
            np.asarray(features["end_positions"]),
        )
    version_2 = config.data.version_2_with_negative
    predictions = postprocess_predictions(
        example_ids=examples["id"],
        contexts=examples["context"],
        feature_example_ids=features["example_id"],
        start_logits=start_logits,
        end_logits=end_logits,
        offsets=offsets_to_array(features["offset_mapping"], start_logits.shape[1]),
        cls_index=np.asarray(features["cls_index"]),
        n_best=config.inference.n_best,
        max_answer_length=config.inference.max_answer_length,
        version_2_with_negative=version_2,
        null_score_diff_threshold=config.inference.null_score_diff_threshold,
    )
    references = {i: a["text"] for i, a in zip(examples["id"], examples["answers"], strict=True)}
    if version_2:
        result = squad_v2(predictions.answers, references, predictions.null_score_diff)
        scores.update(result, exact_match=result["exact"])
    else:
        scores.update(squad_v1(predictions.answers, references))
    return scores
