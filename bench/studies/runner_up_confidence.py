"""How well the confidence of the answers after the first (``--top-k``) is calibrated.

Reads one ``qa-finetune evaluate --allow-no-answer`` report folder of a calibrated run
(``nbest_predictions.json``, ``no_answer_signals.json``, ``predictions.json``,
``confidence.json``) and its data file. Each question's ranked list is rebuilt as ``ask
--top-k`` gives it (the answer given first, then the other candidates, "no answer" among them,
by their share of one softmax over the spans and "no answer"); candidates 2 and 3 get their
confidence from the first's (``decoding.confident_answer.runner_up_confidence``) and are judged
right by exact match (or "no answer" on a question without one). With ``--calibration`` (the
run's ``calibration.json``) the alternative is judged too: the calibrator applied to each
candidate's own features and share, as if it were the answer given.

    python bench/studies/runner_up_confidence.py outputs/eval-subjqa-run \
        outputs/subjqa-dev-800.json --calibration outputs/subjqa-150-cal/calibration.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from qa_finetune.config import DataConfig
from qa_finetune.data.records import read_records
from qa_finetune.decoding.confidence import Calibration, answer_features
from qa_finetune.decoding.confidence_metrics import summary
from qa_finetune.decoding.confident_answer import runner_up_confidence
from qa_finetune.metrics import v2_question_scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("--calibration", type=Path)
    args = parser.parse_args()
    calibration = (
        Calibration.from_dict(json.loads(args.calibration.read_text()), str(args.calibration))
        if args.calibration
        else None
    )
    nbest = json.loads((args.report / "nbest_predictions.json").read_text())
    signals = json.loads((args.report / "no_answer_signals.json").read_text())
    given = json.loads((args.report / "predictions.json").read_text())
    first = json.loads((args.report / "confidence.json").read_text())["questions"]
    gold = {
        r["id"]: list(r["answers"]["text"])
        for r in read_records(args.data, DataConfig(allow_no_answer=True))
    }
    values: list[float] = []
    own: list[float] = []
    right: list[bool] = []
    for qid, answer in given.items():
        spans = nbest.get(qid) or []
        if not spans or not signals.get(qid):
            continue
        logits = [c["score"] for c in spans] + [signals[qid]["null"]]
        peak = max(logits)
        shares = [math.exp(v - peak) for v in logits]
        total = sum(shares)
        candidates = [(c["text"], s / total) for c, s in zip(spans, shares, strict=False)]
        candidates.append(("", shares[-1] / total))
        chosen = next((c for c in candidates if c[0] == answer), ("", shares[-1] / total))
        rest = sorted((c for c in candidates if c != chosen), key=lambda c: -c[1])[:2]
        for text, share in rest:
            values.append(runner_up_confidence(first[qid]["confidence"], chosen[1], share))
            right.append(v2_question_scores(text, gold[qid])[0] == 1.0)
            if calibration is not None:
                row = answer_features(signals[qid], text, not text)
                own.append(float(calibration.confidence([row], [share])[0]))
    correct = np.asarray(right)
    print(f"{args.report}: {len(values)} answers ranked 2-3, share right {correct.mean():.3f}")
    methods = {"share of what the first leaves": values, "calibrator on its own features": own}
    for name, numbers in methods.items():
        if not numbers:
            continue
        confidence = np.asarray(numbers)
        found = summary(confidence, correct, correct.astype(float))
        print(
            f"  {name}: mean confidence {confidence.mean():.3f}, ECE {found['ece']:.3f}, "
            f"AUROC {found['auroc']:.3f}"
        )


if __name__ == "__main__":
    main()
