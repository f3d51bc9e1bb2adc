"""How trustworthy the confidence of ``evaluate --open``'s answers is, beside the passage
confidence alone (``open_confidence`` in its ``metrics.json``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from qa_finetune.calibration.answers import FoundConfidence


def open_confidence_figures(
    calibration: Any,
    confidences: dict[str, FoundConfidence],
    gold: dict[str, list[str]],
    retriever: str | None,
) -> dict[str, Any]:
    """How trustworthy the confidence of the answers found by search is (ECE, AUROC, the
    risk-coverage area; ``calibration.metrics``), beside the passage confidence
    alone, on every question answered (before any "not sure"); {} for an uncalibrated model."""
    from qa_finetune.calibration.metrics import summary
    from qa_finetune.metrics import v2_question_scores

    if calibration is None or not confidences:
        return {}
    ids = list(confidences)
    judged = [v2_question_scores(confidences[i].text, gold[i]) for i in ids]
    correct = np.array([exact == 1.0 for exact, _ in judged])
    f1 = np.array([overlap for _, overlap in judged], dtype=np.float64)
    used = np.array([confidences[i].confidence for i in ids])
    passage = np.array([confidences[i].passage for i in ids])
    opened = calibration.open is not None and calibration.open.applies_to(retriever)

    def kept(values: np.ndarray) -> dict[str, Any]:
        figures = summary(values, correct, f1)
        keys = ("ece", "auroc", "risk_coverage_area", "mean_confidence", "accuracy")
        return {key: figures[key] for key in keys}

    return {
        "open_confidence": {
            "answered": len(ids),
            "from": "open calibration" if opened else "passage calibration",
            **kept(used),
            "passage_confidence": kept(passage),
        }
    }
