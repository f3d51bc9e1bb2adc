"""Issue 50's levers side by side: each 30-minute lever config (``configs/levers/``) trained
alone, then scored on SQuAD v1.1 dev and on its TyDi QA monitor, against the current recipe at
the same budget (``baseline-30``: ``configs/minilm-31k.yaml`` at 30 minutes).

    PYTHONPATH=$PWD .venv/bin/python bench/recipe_levers.py            # every lever: ~6 hours
    PYTHONPATH=$PWD .venv/bin/python bench/recipe_levers.py --levers baseline-30,ema-30
    PYTHONPATH=$PWD .venv/bin/python bench/recipe_levers.py --dry-run  # the commands only

Each command (train, then evaluate) runs alone, in a session of its own at the top CPU share:
``setsid --wait bash -c 'echo -15 > /proc/$$/autogroup; exec CMD'``, one after the other, so
no two levers share the clock. A lever whose run already has ``metrics.json`` is not trained
again, nor one with its SQuAD evaluation scored again: a stopped benchmark continues where it
stopped. Results: a Markdown table on stdout (F1 deltas against the baseline) and ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402

LEVERS = (
    "baseline-30",
    "layer-decay-30",
    "ema-30",
    "born-again-30",
    "windows-256-30",
    "windows-512-30",
    "batch-8-30",
    "batch-32-30",
)
BASELINE = "baseline-30"
SQUAD_DEV = "../shared/data/squad-v1.1-dev.json"
EVAL_FOLDER = "eval-squad-v1.1"  # inside each lever's run directory


def alone(command: list[str]) -> list[str]:
    """``command`` in a session of its own whose autogroup has the top CPU share (nice -15),
    waited for: the way every timed run is started on this machine."""
    script = "echo -15 > /proc/$$/autogroup; exec " + shlex.join(command)
    return ["setsid", "--wait", "bash", "-c", script]


def run_dir(output_dir: Path, lever: str) -> Path:
    """Where ``lever``'s run goes (each config's ``run_name`` is ``lever-<name>``)."""
    return output_dir / f"lever-{lever}"


def lever_commands(lever: str, args: argparse.Namespace) -> list[list[str]]:
    """The train and evaluate commands of ``lever`` (each to run with ``alone``)."""
    folder = run_dir(args.output_dir, lever)
    train = [args.cli, "train", "--config", f"configs/levers/{lever}.yaml"]
    train += ["--set", f"train.output_dir={args.output_dir}"]
    for assignment in args.set or []:
        train += ["--set", assignment]
    evaluate = [args.cli, "evaluate", "--model", str(folder), "--data", args.data]
    evaluate += ["--report-dir", str(folder / EVAL_FOLDER)]
    if args.eval_limit:
        evaluate += ["--max-samples", str(args.eval_limit)]
    return [train, evaluate]


def _json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def lever_row(output_dir: Path, lever: str) -> dict[str, Any]:
    """One lever's figures from its run: steps, minutes, the monitor (the run's own
    validation: TyDi dev) and SQuAD v1.1 dev (its evaluation); None where missing."""
    folder = run_dir(output_dir, lever)
    metrics = _json(folder / "metrics.json") or {}
    squad = _json(folder / EVAL_FOLDER / "metrics.json") or {}
    seconds = metrics.get("train_seconds")
    average = metrics.get("weight_average") or {}
    return {
        "lever": lever,
        "steps": metrics.get("steps"),
        "minutes": round(seconds / 60, 1) if seconds is not None else None,
        "monitor_f1": metrics.get("f1"),
        "squad_em": squad.get("exact_match"),
        "squad_f1": squad.get("f1"),
        "kept": average.get("kept", "raw" if metrics else None),
    }


def _cell(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _delta(value: float | None, base: float | None) -> str:
    return "-" if value is None or base is None else f"{value - base:+.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table: each lever's figures and its F1 deltas against the baseline."""
    base = next((row for row in rows if row["lever"] == BASELINE), {})
    lines = [
        "| lever | steps | train min | TyDi dev F1 (monitor) | delta | SQuAD v1.1 dev EM / F1 "
        "| delta F1 | weights kept |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['lever']} | {_cell(row['steps'])} | {_cell(row['minutes'], 1)} "
            f"| {_cell(row['monitor_f1'])} | {_delta(row['monitor_f1'], base.get('monitor_f1'))} "
            f"| {_cell(row['squad_em'])} / {_cell(row['squad_f1'])} "
            f"| {_delta(row['squad_f1'], base.get('squad_f1'))} | {_cell(row['kept'])} |"
        )
    return "\n".join(lines)


def parse_levers(text: str) -> list[str]:
    """The comma-separated lever names, each one of ``LEVERS``; an unknown one is an error."""
    levers = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in levers if name not in LEVERS]
    if unknown or not levers:
        raise SystemExit(
            f"error: unknown lever {unknown[0] if unknown else '(none)'!r}: choose among "
            f"{', '.join(LEVERS)}"
        )
    return levers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levers", default=",".join(LEVERS), help="comma-separated names")
    parser.add_argument("--data", default=SQUAD_DEV, help="SQuAD v1.1 dev (scored after each)")
    parser.add_argument("--output-dir", type=Path, default=Path("outputs"), help="runs root")
    parser.add_argument("--cli", default=str(ROOT / ".venv" / "bin" / "qa-finetune"))
    parser.add_argument("--set", action="append", help="KEY=VALUE for every lever's train")
    parser.add_argument("--eval-limit", type=int, help="score only the first N questions")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/recipe_levers.json")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args(argv)
    levers = parse_levers(args.levers)
    # Relative paths read from the repository's root, where every command runs.
    args.output_dir = ROOT / args.output_dir
    for lever in levers:
        done = (
            run_dir(args.output_dir, lever) / "metrics.json",
            run_dir(args.output_dir, lever) / EVAL_FOLDER / "metrics.json",
        )
        for command, finished in zip(lever_commands(lever, args), done, strict=True):
            if finished.is_file():
                continue
            print("$ " + shlex.join(alone(command)), flush=True)
            if not args.dry_run:
                subprocess.run(alone(command), check=True, cwd=ROOT)
    if args.dry_run:
        return 0
    rows = [lever_row(args.output_dir, lever) for lever in levers]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": machine_line(), "rows": rows}, indent=2) + "\n")
    print(machine_line())
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
