"""How well the confidence of the answers after the first (``--top-k``) is calibrated.

Reads one ``qa-finetune evaluate --allow-no-answer`` report folder of a calibrated run
(``nbest_predictions.json``, ``no_answer_signals.json``, ``predictions.json``,
``confidence.json``), its data file and the run (its ``calibration.json`` and the threshold of
its ``no_answer_rule.json``). Each question's list is ranked as ``ask --top-k 3
--allow-no-answer`` ranks it (``calibration.runner_up.later_candidates``: the answer
given first, "no answer" placed by the run's rule), and candidates 2 and 3 are judged right
by exact match (or "no answer" on a question without one) against two confidences: the share
of what the first leaves, and the run's runner-up calibration when it has one.

    python bench/studies/runner_up_confidence.py outputs/eval-general-half-b \
        outputs/general-half-b-0.3.jsonl --run outputs/minilm-31k-cal-half-0.3
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from qa_finetune.calibration.metrics import summary
from qa_finetune.calibration.runner_up import later_candidates
from qa_finetune.config import DataConfig
from qa_finetune.data.records import read_records
from qa_finetune.runs.calibration_file import read_calibration
from qa_finetune.runs.no_answer_rule_file import read_rule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("--run", type=Path, required=True)
    args = parser.parse_args()
    calibration = read_calibration(args.run)
    rule = read_rule(args.run)
    if calibration is None or rule is None:
        raise SystemExit(f"{args.run}: needs calibration.json and no_answer_rule.json")
    nbest = json.loads((args.report / "nbest_predictions.json").read_text())
    signals = json.loads((args.report / "no_answer_signals.json").read_text())
    given = json.loads((args.report / "predictions.json").read_text())
    first = json.loads((args.report / "confidence.json").read_text())["questions"]
    gold = {
        r["id"]: list(r["answers"]["text"])
        for r in read_records(args.data, DataConfig(allow_no_answer=True))
    }
    predictions = SimpleNamespace(nbest=nbest, signals=signals)
    confidences = {qid: first[qid]["confidence"] for qid in given if qid in first}
    abstained = {qid: not answer for qid, answer in given.items()}
    rows, correct, shares = later_candidates(
        predictions, gold, confidences, abstained, rule.threshold
    )
    print(f"{args.report}: {len(rows)} answers ranked 2-3, share right {correct.mean():.3f}")
    methods = {"share of what the first leaves": shares}
    if calibration.runner_up is not None:
        methods["runner-up calibration"] = calibration.runner_up.confidence(rows)
    for name, numbers in methods.items():
        confidence = np.asarray(numbers)
        found = summary(confidence, correct, correct.astype(float))
        print(
            f"  {name}: mean confidence {confidence.mean():.3f}, ECE {found['ece']:.3f}, "
            f"AUROC {found['auroc']:.3f}"
        )


if __name__ == "__main__":
    main()
