"""A fine-tuned run averaged with its base at several weights: domain score against forgetting.

For each weight: ``qa-finetune interpolate`` (its no-answer rule chosen on the run's held-out
validation file), then ``qa-finetune evaluate`` on a general set (forgetting) and on the
domain's test set. The weight is for users to choose on held-out figures; the test columns are
reported, never used to choose.

    python bench/studies/weight_interpolation.py --model outputs/subjqa-from-answerability \\
        --weights 0.4,0.6,0.8 --general ../shared/data/squad-v1.1-dev.json \\
        --test ../shared/data/subjqa-dev.json --out bench/studies/results/weight_interpolation.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

try:
    from bench._machine import machine_line
except ModuleNotFoundError:  # run as a script: the repository root is two folders up
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench._machine import machine_line

CLI = [sys.executable, "-m", "qa_finetune"]
KEPT = ("f1", "exact_match", "HasAns_f1", "NoAns_f1", "HasAns_f1_answering_all", "no_answer_auc")


def _evaluate(run: Path, data: str, report: Path, no_answer: bool) -> dict[str, Any]:
    command = [*CLI, "evaluate", "--model", str(run), "--data", data, "--report-dir", str(report)]
    subprocess.run(command + (["--allow-no-answer"] if no_answer else []), check=True)
    metrics = json.loads((report / "metrics.json").read_text(encoding="utf-8"))
    return {key: metrics[key] for key in KEPT if key in metrics}


def one_weight(args: argparse.Namespace, weight: float) -> dict[str, Any]:
    """Interpolate at ``weight`` and score the new run on held-out, general and test data."""
    run = args.out_dir / f"w{weight:.2f}"
    began = time.perf_counter()
    command = [*CLI, "interpolate", "--model", args.model, "--weight", str(weight)]
    subprocess.run(
        command + ["--output", str(run)] + (["--base", args.base] * bool(args.base)), check=True
    )
    rule = json.loads((run / "no_answer_rule.json").read_text(encoding="utf-8"))
    row: dict[str, Any] = {
        "weight": weight,
        "interpolate_seconds": round(time.perf_counter() - began, 1),
        "held_out": rule["compared"][rule["kind"]] | {"rule": rule["kind"]},
    }
    row["general"] = _evaluate(run, args.general, args.out_dir / f"general-w{weight:.2f}", False)
    row["test"] = _evaluate(run, args.test, args.out_dir / f"test-w{weight:.2f}", True)
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    """Every weight in turn; the rows as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--base")
    parser.add_argument("--weights", default="0.4,0.6,0.8")
    parser.add_argument("--general", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--out-dir", type=Path, default=Path("outputs/interpolated"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = [one_weight(args, float(w)) for w in args.weights.split(",")]
    report = {"machine": machine_line(), "model": args.model, "base": args.base, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
