"""Forward passes in flight at once, and the threads each gets: windows per second.

    .venv/bin/python bench/studies/passes_at_once.py --model outputs/minilm-31k-400steps \\
        --data ../shared/data/squad-v1.1-dev.json

The windows of the first ``--questions`` SQuAD dev questions, sorted by length and cut into
batches of ``--batch`` windows, go through ``QuestionAnswerer.predict_windows`` (the compiled
model, what ``serve`` runs) from ``passes`` threads at once, each taking every
``passes``-th batch. Each setting runs in a process of its own, since TensorFlow fixes its
thread pools when it starts: ``threads`` per pass is its intra-op setting (``all``: its
default, every core). Rounds of all the settings interleave, so drift of the machine hits
each alike; the table gives each setting's median and range over the rounds, and its CPU
time per window (all the process's threads).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402

SETTINGS = ((1, 0), (1, 1), (2, 0), (2, 1))  # (passes, threads per pass; 0: all cores)


def measure(args: argparse.Namespace) -> dict[str, float]:
    """One setting in this process: windows per second and CPU ms per window."""
    if args.threads:
        os.environ["TF_NUM_INTRAOP_THREADS"] = str(args.threads)
    os.environ.setdefault("QA_FINETUNE_BATCH_PROFILE", "off")
    from bench.serve_load import load_pairs
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(args.model)
    pairs = load_pairs(Path(args.data), args.questions)
    windows = answerer.windows([p["question"] for p in pairs], [p["context"] for p in pairs])
    columns = {k: v for k, v in windows.encoding.items() if k != "offset_mapping"}
    order = sorted(range(len(columns["input_ids"])), key=lambda i: len(columns["input_ids"][i]))
    batches = [
        {name: [rows[i] for i in order[b : b + args.batch]] for name, rows in columns.items()}
        for b in range(0, len(order), args.batch)
    ]
    for batch in batches[:: max(1, len(batches) // 4)]:  # trace and warm every shape class
        answerer.predict_windows(batch, compile=True)

    def run(share: list[dict[str, list]]) -> None:
        for batch in share:
            answerer.predict_windows(batch, compile=True)

    workers = [
        threading.Thread(target=run, args=(batches[k :: args.passes],)) for k in range(args.passes)
    ]
    began, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - began
    return {
        "windows_per_s": len(order) / seconds,
        "cpu_ms": 1000 * (time.process_time() - cpu) / len(order),
    }


def one_round(args: argparse.Namespace, passes: int, threads: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--model", args.model, "--data", args.data]
    command += ["--questions", str(args.questions), "--batch", str(args.batch)]
    command += ["--one", f"{passes},{threads}"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="Run dir or model folder.")
    parser.add_argument("--data", required=True, help="SQuAD v1.1 dev JSON.")
    parser.add_argument("--questions", type=int, default=192, help="Questions windowed.")
    parser.add_argument("--batch", type=int, default=8, help="Windows per pass.")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of every setting.")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: "passes,threads"
    args = parser.parse_args()
    if args.one:
        args.passes, args.threads = (int(x) for x in args.one.split(","))
        print(json.dumps(measure(args)))
        return
    results: dict[tuple[int, int], list[dict[str, float]]] = {s: [] for s in SETTINGS}
    for _ in range(args.rounds):
        for passes, threads in SETTINGS:
            results[(passes, threads)].append(one_round(args, passes, threads))
    print(machine_line())
    print(f"model {args.model}; {args.questions} SQuAD dev questions, passes of {args.batch}")
    print("| passes at once | threads each | windows/s, median (range) | CPU ms per window |")
    print("|---:|---|---|---:|")
    for (passes, threads), runs in results.items():
        rates = [run["windows_per_s"] for run in runs]
        cpu = statistics.median(run["cpu_ms"] for run in runs)
        print(
            f"| {passes} | {threads or 'all'} | {statistics.median(rates):.1f} "
            f"({min(rates):.1f}–{max(rates):.1f}) | {cpu:.1f} |"
        )


if __name__ == "__main__":
    main()
