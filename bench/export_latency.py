"""ONNX export vs TensorFlow: cold ``ask``, warm latency, int8 speed and size, answer agreement.

    nice .venv/bin/python bench/export_latency.py --run outputs/demo \
        --data ../shared/data/squad-v1.1-dev.json

The run is exported once (``RUN/onnx``: ``model.onnx`` and ``model.int8.onnx``) unless that
folder exists. Cold rows start a fresh process each time and are timed alternately, so machine
noise hits all three alike: ``python -c 'import tensorflow'``, ``ask`` through ONNX (the export
folder, ``--backend auto``) and ``ask`` through TensorFlow (the run, ``--backend tf``). Warm
rows time ``QuestionAnswerer.answer`` per question on SQuAD v1.1 dev paragraphs, the three
backends alternating question by question. Agreement and accuracy use the first
``--questions`` dev questions, answered in batches by each backend with the same windows.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402
from qa_finetune.inference.answerer import QuestionAnswerer  # noqa: E402
from qa_finetune.metrics import squad_v1  # noqa: E402


def dev_questions(path: Path, count: int) -> list[dict[str, Any]]:
    """The first ``count`` SQuAD dev questions with their paragraph and gold answers."""
    rows = []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [a["text"] for a in qa["answers"]]
                rows.append({"id": qa["id"], "question": qa["question"],
                             "context": paragraph["context"], "answers": answers})  # fmt: skip
                if len(rows) == count:
                    return rows
    return rows


def seconds_of(command: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    return time.perf_counter() - began


def cold(run: Path, onnx_dir: Path, question: str, context: str, runs: int) -> dict[str, float]:
    """Median seconds of each fresh-process command, the three alternating."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as folder:
        context_file = Path(folder) / "context.txt"
        context_file.write_text(context, encoding="utf-8")
        ask = [sys.executable, "-m", "qa_finetune", "ask", question, "--context-file",
               str(context_file)]  # fmt: skip
        commands = {
            "import tensorflow": [sys.executable, "-c", "import tensorflow"],
            "ask, ONNX (auto)": [*ask, "--model", str(onnx_dir)],
            "ask, TensorFlow": [*ask, "--model", str(run), "--backend", "tf"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, command in commands.items():
                times[name].append(seconds_of(command, env))
    return {name: statistics.median(values) for name, values in times.items()}


def warm(answerers: dict[str, QuestionAnswerer], rows: list[dict[str, Any]]) -> dict[str, float]:
    """Median seconds per question of each answerer: each answers all ``rows`` in a block, and
    the blocks run twice in turn (ABCABC).

    Blocks, not question-by-question alternation: ONNX Runtime's worker threads keep spinning
    for a while after each run, and would slow whichever session runs next. Two rounds spread
    drift in the machine's load over all of them.
    """
    times: dict[str, list[float]] = {name: [] for name in answerers}
    # Warm-up past COMPILE_AFTER_BATCHES, so TensorFlow runs its traced graph.
    for answerer in answerers.values():
        for row in rows[:20]:
            answerer.answer(row["question"], row["context"])
    for _ in range(2):
        for name, answerer in answerers.items():
            for row in rows:
                began = time.perf_counter()
                answerer.answer(row["question"], row["context"])
                times[name].append(time.perf_counter() - began)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=ROOT / "outputs" / "demo")
    parser.add_argument(
        "--data", type=Path, default=ROOT.parent / "shared/data/squad-v1.1-dev.json"
    )
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--warm-questions", type=int, default=100)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--cold-only", action="store_true", help="stop after the cold rows")
    args = parser.parse_args()

    onnx_dir = args.run / "onnx"
    if not (onnx_dir / "model.int8.onnx").is_file():
        from qa_finetune.publish.export import export_run

        began = time.perf_counter()
        export_run(args.run, "onnx", quantize="int8", overwrite=True)
        print(f"exported {onnx_dir} in {time.perf_counter() - began:.0f} s")
    rows = dev_questions(args.data, args.questions)
    sizes = {
        name: (onnx_dir / name).stat().st_size / 2**20 for name in ("model.onnx", "model.int8.onnx")
    }
    tf_h5 = (args.run / "model" / "tf_model.h5").stat().st_size / 2**20

    print(machine_line())
    print(f"model: {args.run} ({json.loads((onnx_dir / 'config.json').read_text())['model_type']})")
    row = rows[0]
    cold_times = cold(args.run, onnx_dir, row["question"], row["context"], args.cold_runs)
    for name, seconds in cold_times.items():
        print(f"cold  {name:<20} {seconds:6.2f} s  (median of {args.cold_runs})")
    if args.cold_only:
        return

    answerers = {
        "tf": QuestionAnswerer.load(str(args.run), backend="tf"),
        "onnx fp32": QuestionAnswerer.load(str(onnx_dir), backend="onnx"),
        "onnx int8": QuestionAnswerer.load(str(onnx_dir), quantized=True),
    }
    warm_times = warm(answerers, rows[: args.warm_questions])
    for name, seconds in warm_times.items():
        print(f"warm  {name:<20} {seconds * 1000:6.1f} ms per question (median)")
    print(f"int8 speed-up over fp32: {warm_times['onnx fp32'] / warm_times['onnx int8']:.2f}x")
    print(f"size: tf_model.h5 {tf_h5:.1f} MiB, model.onnx {sizes['model.onnx']:.1f} MiB, "
          f"model.int8.onnx {sizes['model.int8.onnx']:.1f} MiB "
          f"({sizes['model.onnx'] / sizes['model.int8.onnx']:.2f}x smaller)")  # fmt: skip

    references = {r["id"]: r["answers"] for r in rows}
    pairs = [(r["question"], r["context"]) for r in rows]
    answers = {}
    for name, answerer in answerers.items():
        began = time.perf_counter()
        results = answerer.answer_batch(pairs)
        answers[name] = {r["id"]: res[0] for r, res in zip(rows, results, strict=True)}
        scores = squad_v1({k: v["answer"] for k, v in answers[name].items()}, references)
        print(f"{name:<10} EM {scores['exact_match']:.2f}  F1 {scores['f1']:.2f}  "
              f"on {len(rows)} questions ({time.perf_counter() - began:.0f} s)")  # fmt: skip
    for other in ("onnx fp32", "onnx int8"):
        differ = [
            k for k in references
            if (answers["tf"][k]["start"], answers["tf"][k]["end"])
            != (answers[other][k]["start"], answers[other][k]["end"])
        ]  # fmt: skip
        print(f"tf vs {other}: {len(rows) - len(differ)}/{len(rows)} identical answer spans")
        for k in differ[:5]:
            a, b = answers["tf"][k], answers[other][k]
            print(f"  {k}: tf {a['answer']!r} ({a['score']:.4f}) vs {b['answer']!r} "
                  f"({b['score']:.4f})")  # fmt: skip


if __name__ == "__main__":
    main()
