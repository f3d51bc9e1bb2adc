"""Run every benchmark in bench/ one after another, with settings small enough for 2 CPU cores.

    .venv/bin/python bench/run_all.py --data ../shared/data [--quick] [--model outputs/RUN]

Each benchmark runs in its own process (a fresh TensorFlow, so one cannot warm up the next)
with its command printed before its output. The default settings keep the whole run under
15 minutes on a 2-core CPU; ``--quick`` shrinks them further to a smoke test of a few minutes.
``accuracy.py`` and ``export_latency.py`` need a trained run and run only with ``--model``.
Every benchmark runs even when an earlier one fails; the exit status is 1 when any failed.
``--dry-run`` prints the commands without running them. For figures worth recording, run a
script on its own with its larger defaults (see each script's ``--help``).

bench/ holds the maintained benchmarks: the ones run here, and ``serve_load.py``,
``retrieval_scale.py`` and ``data_curve.py``, which take a trained run and longer than this
run's budget. One-off studies, whose figures bench/reports/ records, live in ``bench/studies/``
with their results.
"""

from __future__ import annotations

import argparse
import itertools
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
DEV_FILE = "squad-v1.1-dev.json"
TRAIN_FILE = "squadshifts-new-wiki.json"
# 440 questions: the quick run prepares training windows in seconds rather than a minute.
QUICK_TRAIN_FILE = "tydiqa-goldp-en-dev.json"


@dataclass(frozen=True)
class Benchmark:
    """One script and the arguments it runs with."""

    script: str
    args: tuple[str, ...]

    def command(self) -> list[str]:
        return [sys.executable, str(BENCH_DIR / self.script), *self.args]

    def shown(self) -> str:
        """The command as a reader would type it from the repository root."""
        return shlex.join(["python", f"bench/{self.script}", *self.args])


def plan(data: Path, quick: bool, model: str | None) -> list[Benchmark]:
    """The benchmarks to run, in order; the numbers are (default, --quick)."""

    def pick(default: int, small: int) -> str:
        return str(small if quick else default)

    dev = str(data / DEV_FILE)
    train = str(data / (QUICK_TRAIN_FILE if quick else TRAIN_FILE))
    benchmarks = [
        Benchmark(
            "prepare.py",
            ("--data", dev, "--limit", pick(2000, 300), "--repeats", pick(2, 1)),
        ),
        Benchmark(
            "postprocess.py",
            ("--data", dev, "--limit", pick(2000, 300), "--repeats", pick(3, 1)),
        ),
        Benchmark(
            "train_throughput.py",
            (
                "--data",
                train,
                "--batch-size",
                pick(16, 8),
                "--steps",
                pick(6, 2),
                "--warmup",
                pick(2, 1),
                "--repeats",
                pick(2, 1),
            ),
        ),
        Benchmark(
            "ask_latency.py",
            (
                "--data",
                dev,
                "--questions",
                pick(10, 3),
                "--repeats",
                pick(3, 1),
                "--cold-runs",
                pick(2, 1),
            ),
        ),
        Benchmark(
            "predict_throughput.py",
            # The model.predict row pads every window to 384 tokens: the slowest; quick skips it.
            ("--data", dev, "--limit", pick(300, 50), "--repeats", pick(2, 1))
            + (("--no-recipe",) if quick else ()),
        ),
    ]
    if model is not None:
        benchmarks.append(
            Benchmark(
                "accuracy.py",
                ("--model", model, "--data", dev, "--limit", pick(500, 50), "--check", pick(20, 5)),
            )
        )
        # Exports RUN/onnx (fp32 + int8) first when the run has none.
        benchmarks.append(
            Benchmark(
                "export_latency.py",
                (
                    *("--run", model, "--data", dev, "--questions", pick(1000, 100)),
                    *("--warm-questions", pick(100, 10), "--cold-runs", pick(5, 1)),
                ),
            )
        )
    return benchmarks


def missing_files(benchmarks: list[Benchmark]) -> list[str]:
    """Scripts or data files the plan names that do not exist, so nothing starts in vain."""
    missing = [b.script for b in benchmarks if not (BENCH_DIR / b.script).is_file()]
    for benchmark in benchmarks:
        for flag, value in itertools.pairwise(benchmark.args):
            if flag == "--data" and not Path(value).is_file() and value not in missing:
                missing.append(value)
    return missing


def run_one(benchmark: Benchmark) -> tuple[int, float]:
    """Run one benchmark with its output going straight to ours; (exit status, seconds)."""
    print(f"\n{'=' * 100}\n$ {benchmark.shown()}\n", flush=True)
    began = time.perf_counter()
    status = subprocess.run(benchmark.command(), check=False).returncode
    return status, time.perf_counter() - began


def summary(results: list[tuple[Benchmark, int, float]]) -> str:
    """A markdown table: script, wall seconds, outcome."""
    lines = ["| benchmark | seconds | result |", "|---|---:|---|"]
    for benchmark, status, seconds in results:
        outcome = "ok" if status == 0 else f"FAILED (exit {status})"
        lines.append(f"| {benchmark.script} | {seconds:.0f} | {outcome} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=Path("../shared/data"),
        help=f"folder holding {DEV_FILE}, {TRAIN_FILE} and {QUICK_TRAIN_FILE}",
    )
    parser.add_argument("--quick", action="store_true", help="smallest settings: a smoke test")
    parser.add_argument(
        "--model", help="trained run or model directory: also run accuracy.py on it"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args()

    benchmarks = plan(args.data, args.quick, args.model)
    missing = missing_files(benchmarks)
    if missing:
        sys.exit(f"error: not found: {', '.join(missing)} (check --data)")
    if args.model is None:
        print("accuracy.py skipped: pass --model RUN_DIR to score a trained model")
    if args.dry_run:
        for benchmark in benchmarks:
            print(benchmark.shown())
        return

    began = time.perf_counter()
    results = []
    for benchmark in benchmarks:
        status, seconds = run_one(benchmark)
        results.append((benchmark, status, seconds))
    print(f"\n{'=' * 100}\n{summary(results)}")
    print(f"\nTotal: {time.perf_counter() - began:.0f} s")
    failed = [b.script for b, status, _ in results if status != 0]
    if failed:
        sys.exit(f"error: {len(failed)} benchmark(s) failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
