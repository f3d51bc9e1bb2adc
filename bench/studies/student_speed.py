"""A student against its teacher, answer speed in one run: ``ask`` warm per question,
``evaluate`` questions/s and ``serve`` at 1 and 32 clients, each on TensorFlow, ONNX and
ONNX int8.

    .venv/bin/python bench/studies/student_speed.py --teacher ../shared/models/minilm-31k \\
        --student outputs/minilm-31k-student --data ../shared/data/squad-v1.1-dev.json

Both runs are exported to ONNX (fp32 and int8) under ``--work`` once (the teacher's folder
may be read-only). Every measurement is taken of the teacher and of the student in turn, and
over two rounds in alternating order, so drift of the machine hits both alike:

- warm ``ask``: ``QuestionAnswerer.answer`` per question on the first SQuAD dev paragraphs,
  each answerer a block of questions at a time (``export_latency.warm``), median per question;
- ``evaluate``: ``qa-finetune evaluate`` in a process of its own on the first ``--questions``
  questions with the same batch size, its own ``questions_per_second`` (the median of rounds);
- ``serve``: a real server per model and backend on loopback; ``--requests`` questions from
  1 client, then from 32 (``serve_load.run_phase``): questions/s and p50 latency.

The speed-up is the teacher's time over the student's (or the student's rate over the
teacher's). Results also go to ``bench/studies/results/student_speed.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402
from bench.export_latency import dev_questions, warm  # noqa: E402
from bench.serve_load import Phase, Server, load_pairs, run_phase  # noqa: E402


@dataclass(frozen=True)
class Backend:
    """A runtime: the folder it reads (``run`` or its ``onnx`` export) and how it is chosen."""

    kind: str
    backend: str
    quantized: bool = False

    @property
    def flags(self) -> list[str]:
        """The flags of ``evaluate`` and ``serve`` that choose it."""
        return ["--backend", self.backend] + (["--quantized"] if self.quantized else [])

    @property
    def slug(self) -> str:
        return self.backend + ("-int8" if self.quantized else "")


BACKENDS = {
    "TensorFlow": Backend("run", "tf"),
    "ONNX": Backend("onnx", "onnx"),
    "ONNX int8": Backend("onnx", "onnx", quantized=True),
}
ROLES = ("teacher", "student")


def exported(run: Path, folder: Path) -> Path:
    """``folder`` holding the run's ONNX export and its int8 copy, written once."""
    if not (folder / "model.int8.onnx").is_file():
        from qa_finetune.publish.export import export_run

        began = time.perf_counter()
        export_run(run, "onnx", output=folder, quantize="int8", overwrite=True)
        print(f"exported {run} to {folder} in {time.perf_counter() - began:.0f} s", flush=True)
    return folder


def warm_rows(folders: dict[str, dict[str, Path]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median seconds per warm ``answer`` of every role and backend."""
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerers = {}
    for name, backend in BACKENDS.items():
        for role in ROLES:
            answerers[(role, name)] = QuestionAnswerer.load(
                str(folders[role][backend.kind]),
                backend=backend.backend,
                quantized=backend.quantized,
            )
    names = {f"{role}|{backend}": a for (role, backend), a in answerers.items()}
    times = warm(names, rows)
    return {backend: {role: times[f"{role}|{backend}"] for role in ROLES} for backend in BACKENDS}


def evaluate_rate(folder: Path, flags: list[str], args: argparse.Namespace, report: Path) -> float:
    """``evaluate``'s own questions/s, in a fresh process."""
    command = [sys.executable, "-m", "qa_finetune", "evaluate", "--model", str(folder),
               "--data", str(args.data), "--max-samples", str(args.questions),
               "--batch-size", str(args.batch_size), "--report-dir", str(report),
               *flags]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"evaluate failed: {' '.join(command)}\n{done.stderr[-1500:]}")
    return json.loads((report / "metrics.json").read_text())["questions_per_second"]


def evaluate_rows(folders: dict[str, dict[str, Path]], args: argparse.Namespace) -> dict[str, Any]:
    """Median questions/s of ``evaluate`` for every role and backend, rounds alternating."""
    rates: dict[str, dict[str, list[float]]] = {b: {r: [] for r in ROLES} for b in BACKENDS}
    for round_ in range(args.rounds):
        for name, backend in BACKENDS.items():
            for role in ROLES if round_ % 2 == 0 else ROLES[::-1]:
                report = args.work / f"evaluate-{role}-{backend.slug}-{round_}"
                folder = folders[role][backend.kind]
                rate = evaluate_rate(folder, backend.flags, args, report)
                rates[name][role].append(rate)
                print(f"evaluate {name:<10} {role:<7} {rate:6.1f} questions/s", flush=True)
    return {b: {r: statistics.median(v) for r, v in by.items()} for b, by in rates.items()}


async def serve_pair(
    folders: dict[str, dict[str, Path]],
    backend: Backend,
    pairs: list[dict[str, str]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One server per role; 1 client then 32, rounds alternating: questions/s and p50 ms."""
    servers = {
        role: Server(str(folders[role][backend.kind]), None, None, extra=tuple(backend.flags))
        for role in ROLES
    }
    for role, server in servers.items():
        server.start(args.work / f"serve-{role}-{backend.slug}.log")
    found: dict[int, dict[str, list[Phase]]] = {n: {r: [] for r in ROLES} for n in (1, 32)}
    try:
        for server in servers.values():
            server.wait_ready()
        deadline = time.monotonic() + 3600
        for round_ in range(args.rounds):
            for clients in (1, 32):
                for role in ROLES if round_ % 2 == 0 else ROLES[::-1]:
                    phase = Phase(f"{role}, {clients} clients", clients)
                    await run_phase(servers[role], phase, pairs, args.requests, deadline)
                    found[clients][role].append(phase)
    finally:
        for server in servers.values():
            server.stop()
    return {
        f"{clients} client{'s' if clients > 1 else ''}": {
            role: {
                "questions_per_second": statistics.median(p.ok / p.seconds for p in phases),
                "p50_ms": statistics.median(p.percentile(50) for p in phases),
                "errors": sum(p.errors for p in phases),
            }
            for role, phases in by_role.items()
        }
        for clients, by_role in found.items()
    }


def table(results: dict[str, Any]) -> None:
    """Every point as a Markdown row: teacher, student, speed-up."""
    print("| measurement | backend | teacher | student | speed-up |")
    print("|---|---|---:|---:|---:|")
    for backend, times in results["ask_warm_seconds"].items():
        t, s = times["teacher"] * 1000, times["student"] * 1000
        print(f"| ask, warm, ms per question | {backend} | {t:.1f} | {s:.1f} | {t / s:.2f}x |")
    for backend, rates in results["evaluate_questions_per_second"].items():
        t, s = rates["teacher"], rates["student"]
        print(f"| evaluate, questions/s | {backend} | {t:.1f} | {s:.1f} | {s / t:.2f}x |")
    for backend, points in results["serve"].items():
        for clients, by_role in points.items():
            t, s = by_role["teacher"], by_role["student"]
            rate_t, rate_s = t["questions_per_second"], s["questions_per_second"]
            print(f"| serve, {clients}, questions/s (p50 ms) | {backend} | {rate_t:.1f} "
                  f"({t['p50_ms']:.0f}) | {rate_s:.1f} ({s['p50_ms']:.0f}) | "
                  f"{rate_s / rate_t:.2f}x |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", type=Path, required=True, help="The teacher's run.")
    parser.add_argument("--student", type=Path, required=True, help="The student's run.")
    parser.add_argument("--data", type=Path, required=True, help="SQuAD v1.1 dev JSON.")
    parser.add_argument("--warm-questions", type=int, default=100)
    parser.add_argument("--questions", type=int, default=600, help="Questions per evaluate.")
    parser.add_argument("--requests", type=int, default=128, help="Requests per serve phase.")
    parser.add_argument("--batch-size", type=int, default=32, help="evaluate's batch size.")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, help="Exports and reports (default: temporary).")
    parser.add_argument(
        "--output", type=Path, default=ROOT / "bench/studies/results/student_speed.json"
    )
    args = parser.parse_args()
    args.work = args.work or Path(tempfile.mkdtemp(prefix="student-speed-"))
    args.work.mkdir(parents=True, exist_ok=True)
    runs = {"teacher": args.teacher, "student": args.student}
    folders = {
        role: {"run": run, "onnx": exported(run, args.work / f"{role}-onnx")}
        for role, run in runs.items()
    }
    results: dict[str, Any] = {
        "machine": machine_line(),
        "runs": {role: str(run) for role, run in runs.items()},
    }
    results["ask_warm_seconds"] = warm_rows(folders, dev_questions(args.data, args.warm_questions))
    results["evaluate_questions_per_second"] = evaluate_rows(folders, args)
    pairs = load_pairs(args.data, args.requests)
    results["serve"] = {
        name: asyncio.run(serve_pair(folders, backend, pairs, args))
        for name, backend in BACKENDS.items()
    }
    print(results["machine"])
    table(results)
    args.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
