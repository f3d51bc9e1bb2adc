"""``evaluate`` questions per second with one forward pass at a time and with several at once.

    .venv/bin/python bench/studies/evaluate_passes.py --model outputs/minilm-31k-400steps \\
        --data ../shared/data/squad-v1.1-dev.json

Each round runs ``qa-finetune evaluate --passes N`` once per setting, each in a process of
its own (TensorFlow fixes its thread pools when it starts, and ``--passes`` shares the cores
out before that), on the same first ``--questions`` questions; the order of the settings
alternates from round to round, so drift of the machine hits each alike. The figure is
evaluate's own ``questions_per_second`` in ``metrics.json`` (windowing, forward passes and
decoding; not loading the model or measuring its batch size, which the first run of a
setting may do once). Every run's ``predictions.json`` is compared with the first run's: the
passes must not change an answer. A setting ``N:all`` runs N passes without sharing the
cores out (each on TensorFlow's pool of all of them), as ``crossval`` scores after training
in the same process: it calls ``evaluation.evaluate.evaluate_model`` in its own process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402


def unshared(args: argparse.Namespace) -> None:
    """A child of a ``N:all`` setting: evaluate in N passes, the cores not shared out."""
    from qa_finetune.evaluation.evaluate import evaluate_model

    evaluate_model(
        args.model,
        data=args.data,
        dataset=None,
        report_dir=Path(args.report),
        max_samples=args.questions,
        batch_size=args.batch_size,
        passes=args.passes,
    )


def flags(**values: Any) -> list[str]:
    """``--name value`` for every value that is not None."""
    return [
        part
        for name, value in values.items()
        if value is not None
        for part in (f"--{name.replace('_', '-')}", str(value))
    ]


def one_run(args: argparse.Namespace, setting: str, report: Path) -> dict[str, Any]:
    """``evaluate`` of one setting in a process of its own: its metrics, answers and the
    process's wall seconds (loading included)."""
    passes, _, threads = setting.partition(":")
    common = flags(model=args.model, data=args.data, batch_size=args.batch_size)
    if threads == "all":
        child = flags(questions=args.questions, one=passes, report=report)
        command = [sys.executable, __file__, *common, *child]
    else:
        child = flags(max_samples=args.questions, passes=passes, report_dir=report)
        command = [sys.executable, "-m", "qa_finetune", "evaluate", *common, *child]
    began = time.perf_counter()
    done = subprocess.run(
        command, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True, text=True
    )
    if done.returncode:
        sys.exit(f"evaluate failed ({setting}):\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    return {
        "metrics": json.loads((report / "metrics.json").read_text()),
        "answers": json.loads((report / "predictions.json").read_text()),
        "wall": time.perf_counter() - began,
    }


def differing(first: dict[str, str], other: dict[str, str]) -> int:
    """Questions whose answer differs (or is missing) between two predictions files."""
    return sum(other.get(key) != value for key, value in first.items()) + len(
        set(other) - set(first)
    )


def label(setting: str) -> str:
    """``--passes N``, or N passes on all the cores for ``N:all``."""
    passes, _, threads = setting.partition(":")
    return f"{passes} passes, cores not shared" if threads else f"`--passes {passes}`"


def report(settings: list[str], runs: dict[str, list[dict[str, Any]]]) -> None:
    """The table: each setting's rate by round, its median, and its ratio to the first."""
    base = settings[0]
    print(f"| setting | batch size | questions/s by round | median | vs {label(base)}, by round |")
    print("|---|---:|---|---:|---|")
    for setting in settings:
        rates = [run["metrics"]["questions_per_second"] for run in runs[setting]]
        ratios = [
            rate / other["metrics"]["questions_per_second"]
            for rate, other in zip(rates, runs[base], strict=True)
        ]
        sizes = sorted({run["metrics"]["batch_size"] for run in runs[setting]})
        print(
            f"| {label(setting)} | {', '.join(map(str, sizes))} | "
            f"{', '.join(f'{r:.1f}' for r in rates)} | {statistics.median(rates):.1f} | "
            f"**{statistics.median(ratios):.2f}x** ({', '.join(f'{r:.2f}' for r in ratios)}) |"
        )
    first = runs[base][0]["answers"]
    changed = [differing(first, run["answers"]) for s in settings for run in runs[s]]
    verdict = "identical" if not any(changed) else f"differ in {max(changed)} questions at most"
    print(f"\npredictions.json of all {sum(map(len, runs.values()))} runs: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="Run dir or model folder.")
    parser.add_argument("--data", required=True, help="SQuAD v1.1 dev JSON.")
    parser.add_argument("--questions", type=int, help="The first N questions (default: all).")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of every setting.")
    parser.add_argument(
        "--settings", default="1,2", help="Comma-separated --passes values; N:all: not shared."
    )
    parser.add_argument("--batch-size", type=int, help="Fixed for all (default: evaluate's).")
    parser.add_argument("--work", type=Path, help="Folder for the reports (default: temporary).")
    parser.add_argument("--one", type=int, dest="passes", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.passes:
        unshared(args)
        return
    settings = args.settings.split(",")
    work = args.work or Path(tempfile.mkdtemp(prefix="evaluate-passes-"))
    runs: dict[str, list[dict[str, Any]]] = {setting: [] for setting in settings}
    for round_ in range(args.rounds):
        for setting in settings if round_ % 2 == 0 else settings[::-1]:
            folder = work / f"round-{round_}-passes-{setting.replace(':', '-')}"
            runs[setting].append(one_run(args, setting, folder))
            rate = runs[setting][-1]["metrics"]["questions_per_second"]
            print(f"round {round_ + 1}, {label(setting)}: {rate:.1f} questions/s", flush=True)
    print(machine_line() + f", load average {os.getloadavg()[0]:.1f} at the end")
    questions = runs[settings[0]][0]["metrics"]["total"]
    print(f"model {args.model}; {questions} questions of {args.data}; {args.rounds} rounds\n")
    report(settings, runs)


if __name__ == "__main__":
    main()
