"""``evaluate``'s view of confidence: how far each answer's number can be trusted.

For today's ``score`` and, on a calibrated run, for ``confidence`` side by side: the expected
calibration error (10 equal-width bins), the AUROC of right versus wrong answers, the
risk-coverage curve (``calibration.metrics``) with its area and the coverage at 80% and
90% accuracy. Files: ``confidence.json`` (the figures, the reliability bins and each
question's numbers), ``reliability.png`` and ``risk_coverage.png``. With ``min_confidence``
the answers below it are counted as "not sure" (answered "").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.calibration.confidence import CORRECT_MEANS, Calibration, answers_of
from qa_finetune.calibration.metrics import BINS, summary
from qa_finetune.files import write_json

CONFIDENCE_FILES = ("confidence.json", "reliability.png", "risk_coverage.png")
# Headline figures copied into metrics.json, per number judged.
_HEADLINE = ("ece", "auroc", "risk_coverage_area", "coverage_at_80", "coverage_at_90")
# Points kept of each curve in confidence.json (the figures use every question).
_CURVE_POINTS = 101


def confidence_report(
    predictions: Any,
    gold: Mapping[str, Sequence[str]],
    allow_no_answer: bool,
    calibration: Calibration | None,
    report_dir: Path,
    min_confidence: float | None = None,
) -> tuple[dict[str, Any], set[str]]:
    """The headline figures for ``metrics.json`` and the ids answered "not sure"; the
    report files are written to ``report_dir``."""
    held = answers_of(predictions, gold, allow_no_answer=allow_no_answer)
    judged = {"score": held.scores}
    outside = np.zeros(len(held.ids), dtype=bool)
    if calibration is not None:
        judged["confidence"], outside = calibration.confidence_and_range(held.rows, held.scores)
    figures = {name: summary(values, held.correct, held.f1) for name, values in judged.items()}
    metrics: dict[str, Any] = {"calibrated": calibration is not None, "ece_bins": BINS}
    if calibration is not None:
        # Answers whose features lay outside the calibration's fitted range: extrapolated.
        metrics["confidence_outside_range"] = int(outside.sum())
    for name, found in figures.items():
        metrics.update({f"{name}_{key}": found[key] for key in _HEADLINE})
    not_sure: set[str] = set()
    if calibration is not None and min_confidence is not None:
        below = judged["confidence"] < min_confidence
        not_sure = {qid for qid, low in zip(held.ids, below.tolist(), strict=True) if low}
        metrics.update(min_confidence=min_confidence, not_sure=len(not_sure))
    details = {
        "correct_means": CORRECT_MEANS,
        "calibration": calibration.describe() if calibration else "uncalibrated: score only",
        **{
            name: _with_curve(found, values, held)
            for (name, found), values in zip(figures.items(), judged.values(), strict=True)
        },
        "questions": {
            qid: {
                "correct": bool(held.correct[i]),
                **{name: float(values[i]) for name, values in judged.items()},
                **({"calibration_range": "outside"} if outside[i] else {}),
            }
            for i, qid in enumerate(held.ids)
        },
    }
    write_json(report_dir / "confidence.json", details)
    _plot(figures, judged, held, report_dir)
    return metrics, not_sure


def _with_curve(found: dict[str, Any], values: np.ndarray, held: Any) -> dict[str, Any]:
    from qa_finetune.calibration.metrics import risk_coverage

    curve = risk_coverage(values, held.correct, held.f1)
    keep = np.unique(np.linspace(0, len(values) - 1, min(_CURVE_POINTS, len(values))).round())
    points = keep.astype(np.int64).tolist()
    sampled = {key: [curve[key][i] for i in points] for key in ("coverage", "accuracy", "f1")}
    return {**found, "risk_coverage": sampled}


def _plot(
    figures: dict[str, dict[str, Any]], judged: dict[str, np.ndarray], held: Any, folder: Path
) -> None:
    """The reliability diagrams and the risk-coverage curves, each number beside the other."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from qa_finetune.calibration.metrics import risk_coverage

    fig, axes = plt.subplots(1, len(figures), figsize=(5 * len(figures), 4.5), squeeze=False)
    for axis, (name, found) in zip(axes[0], figures.items(), strict=True):
        bins = [b for b in found["reliability"] if b["count"]]
        axis.bar(
            [(b["low"] + b["high"]) / 2 for b in bins],
            [b["accuracy"] for b in bins],
            width=1 / BINS,
            edgecolor="black",
            alpha=0.7,
        )
        axis.plot([0, 1], [0, 1], "--", color="grey")
        axis.set(xlim=(0, 1), ylim=(0, 1), xlabel=name, ylabel="share right")
        axis.set_title(f"{name}: ECE {found['ece']:.3f} ({BINS} bins)")
    fig.tight_layout()
    fig.savefig(folder / "reliability.png", dpi=100)
    plt.close(fig)
    fig, axis = plt.subplots(figsize=(6, 4.5))
    for number, (name, values) in enumerate(judged.items()):
        curve = risk_coverage(values, held.correct, held.f1)
        area = figures[name]["risk_coverage_area"]
        shown = {"color": f"C{number}"}  # one colour per number judged, F1 dotted
        label = f"{name}: accuracy (AURC {area:.3f})"
        axis.plot(curve["coverage"], curve["accuracy"], label=label, **shown)
        axis.plot(curve["coverage"], curve["f1"], ":", label=f"{name}: F1", **shown)
    axis.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="share answered", ylabel="of those answered")
    axis.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(folder / "risk_coverage.png", dpi=100)
    plt.close(fig)


def report_confidence(
    loaded: Any,
    predictions: Any,
    records: Sequence[Mapping[str, Any]],
    allow_no_answer: bool,
    report_dir: Path,
    result: dict[str, Any],
) -> None:
    """``confidence_report`` for a loaded model; with ``min_confidence`` its "not sure"
    answers become "" in ``predictions`` and the official scores in ``result`` are redone."""
    from qa_finetune.modeling.scoring import references, score

    gold = references(list(records))
    minimum = loaded.settings.min_confidence
    report_dir.mkdir(parents=True, exist_ok=True)
    figures, not_sure = confidence_report(
        predictions, gold, allow_no_answer, loaded.calibration, report_dir, minimum
    )
    result.update(figures)
    if not not_sure:
        return
    for qid in not_sure:
        predictions.answers[qid] = ""
    null_diff = predictions.no_answer_score if allow_no_answer else None
    result.update(score(predictions.answers, gold, allow_no_answer, null_diff))
