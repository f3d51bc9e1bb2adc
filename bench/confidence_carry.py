"""How a confidence calibration carries from the questions it was fitted on to other sets, and
how many held-out questions fitting one (and choosing a no-answer threshold) needs.

Reads the report folders ``qa-finetune evaluate --allow-no-answer`` wrote for one run on
several sets (``predictions.json``, ``nbest_predictions.json``, ``no_answer_signals.json``,
``null_odds.json``) and their data files. Each set is cut in two halves (seeded); a calibration
is fitted on the first half of each set and scored on the second half of every set, so no
figure comes from the questions that fitted it.

    python bench/confidence_carry.py --set general=REPORT_DIR:DATA_FILE \\
        --set subjqa=REPORT_DIR:DATA_FILE --set squad2=REPORT_DIR:DATA_FILE
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.calibration.confidence import HeldOutAnswers, answers_of, fit_calibration
from qa_finetune.calibration.logistic import CalibrationError
from qa_finetune.calibration.metrics import summary
from qa_finetune.calibration.no_answer_rule import tune_no_answer_threshold
from qa_finetune.config import DataConfig
from qa_finetune.data.records import read_records
from qa_finetune.decoding.spans import Predictions
from qa_finetune.metrics import v2_question_scores

SIZES = (25, 50, 100, 200, 400, 800)
REPEATS = 20


def load_set(report: Path, data: Path) -> tuple[Predictions, dict[str, list[str]]]:
    """The run's predictions on a set and the set's gold answers (its scored questions)."""
    predictions = Predictions(
        answers=json.loads((report / "predictions.json").read_text()),
        nbest=json.loads((report / "nbest_predictions.json").read_text()),
        signals=json.loads((report / "no_answer_signals.json").read_text()),
        no_answer_score=json.loads((report / "null_odds.json").read_text()),
    )
    records = read_records(data, DataConfig(allow_no_answer=True))
    gold = {r["id"]: list(r["answers"]["text"]) for r in records if r["id"] in predictions.answers}
    return predictions, gold


def subset(held: HeldOutAnswers, rows: np.ndarray) -> HeldOutAnswers:
    return HeldOutAnswers(
        [held.ids[i] for i in rows],
        [held.rows[i] for i in rows],
        held.scores[rows],
        held.correct[rows],
        held.f1[rows],
        held.unanswerable[rows],
    )


def figures(values: np.ndarray, held: HeldOutAnswers) -> dict[str, Any]:
    found = summary(values, held.correct, held.f1)
    return {k: found[k] for k in ("ece", "auroc", "risk_coverage_area")}


def f1_at(predictions: Predictions, gold: dict[str, list[str]], threshold: float) -> float:
    """Mean v2 F1 (x100) of answering "" above ``threshold`` of the run's no-answer score."""
    total = 0.0
    for qid, answers in gold.items():
        nbest = predictions.nbest.get(qid) or []
        abstain = not nbest or predictions.no_answer_score.get(qid, np.inf) > threshold
        total += v2_question_scores("" if abstain else nbest[0]["text"], answers)[1]
    return 100 * total / len(gold)


def carry(sets: dict[str, tuple[Predictions, dict]], seed: int) -> None:
    halves: dict[str, tuple[HeldOutAnswers, HeldOutAnswers]] = {}
    for name, (predictions, gold) in sets.items():
        held = answers_of(predictions, gold)
        order = np.random.default_rng(seed).permutation(len(held.ids))
        cut = len(order) // 2
        halves[name] = (subset(held, order[:cut]), subset(held, order[cut:]))
    print(
        "| fitted on (first half) | method | "
        + " | ".join(f"{n}: ECE / AUROC / AURC" for n in sets)
        + " |"
    )
    print("|---|---|" + "---:|" * len(sets))
    row = [
        f"{figures(b.scores, b)['ece']:.3f} / {figures(b.scores, b)['auroc']:.3f} / "
        f"{figures(b.scores, b)['risk_coverage_area']:.3f}"
        for _, b in halves.values()
    ]
    print("| (today's score) | | " + " | ".join(row) + " |")
    for name, (first, _) in halves.items():
        calibration = fit_calibration(first, name)
        cells = []
        for _, second in halves.values():
            found = figures(calibration.confidence(second.rows, second.scores), second)
            cells.append(
                f"{found['ece']:.3f} / {found['auroc']:.3f} / {found['risk_coverage_area']:.3f}"
            )
        print(f"| {name} ({len(first.ids)}) | {calibration.method} | " + " | ".join(cells) + " |")


def sizes(name: str, predictions: Predictions, gold: dict, seed: int) -> None:
    """ECE on the second half of calibrations fitted on n questions of the first, and the F1
    there of thresholds chosen on them (median and 10th-90th percentiles of REPEATS draws)."""
    held = answers_of(predictions, gold)
    order = np.random.default_rng(seed).permutation(len(held.ids))
    cut = len(order) // 2
    first, second = order[:cut], subset(held, order[cut:])
    second_gold = {q: gold[q] for q in second.ids}
    full_t, _ = tune_no_answer_threshold(
        predictions, {held.ids[i]: gold[held.ids[i]] for i in first}
    )
    print(
        f"\n{name}: threshold chosen on the whole first half ({cut}): F1 on the second "
        f"{f1_at(predictions, second_gold, full_t):.2f}"
    )
    print("| n | fits | ECE median (10th-90th) | threshold F1 median (10th-90th) |")
    print("|---:|---:|---|---|")
    rng = np.random.default_rng(seed + 1)
    for n in SIZES:
        if n > cut:
            break
        eces, f1s = [], []
        for _ in range(REPEATS):
            rows = rng.choice(first, size=n, replace=False)
            part = subset(held, rows)
            chosen, _ = tune_no_answer_threshold(predictions, {q: gold[q] for q in part.ids})
            f1s.append(f1_at(predictions, second_gold, chosen))
            try:
                calibration = fit_calibration(part, name)
            except CalibrationError:
                continue
            eces.append(figures(calibration.confidence(second.rows, second.scores), second)["ece"])
        e, f = (
            np.percentile(eces, [50, 10, 90]) if eces else [np.nan] * 3,
            np.percentile(f1s, [50, 10, 90]),
        )
        print(
            f"| {n} | {len(eces)}/{REPEATS} | {e[0]:.3f} ({e[1]:.3f}-{e[2]:.3f}) | "
            f"{f[0]:.2f} ({f[1]:.2f}-{f[2]:.2f}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", required=True, metavar="NAME=REPORT:DATA")
    parser.add_argument("--sizes", action="append", default=[], metavar="NAME")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sets = {}
    for item in args.set:
        name, _, paths = item.partition("=")
        report, _, data = paths.partition(":")
        sets[name] = load_set(Path(report), Path(data))
    carry(sets, args.seed)
    for name in args.sizes:
        sizes(name, *sets[name], args.seed)


if __name__ == "__main__":
    main()
