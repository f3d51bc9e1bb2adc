"""ONNX Runtime session options against TensorFlow, one window a pass, on this machine.

    nice .venv/bin/python bench/studies/onnx_session.py --onnx RUN/onnx --run RUN \\
        --data ../shared/data/squad-v1.1-dev.json

The windows of the first ``--questions`` SQuAD v1.1 dev questions (each with its own
paragraph, windowed as ``ask`` windows them) are run one window a pass through sessions made
with different options: the threads of an operator (``intra_op_num_threads``), whether idle
threads spin (``session.intra_op.allow_spinning``), the graph optimisation level, and
``qa_finetune``'s own session (``OnnxPredictor.load``). TensorFlow's compiled graph of the
run runs the same windows. Every configuration runs each window in turn, configurations
interleaved window by window, so machine noise hits all of them alike; the table gives the
median ms per window and its ratio to TensorFlow.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402
from bench.serve_load import load_pairs  # noqa: E402


def session(path: Path, **options: Any) -> Any:
    """A CPU session with the named options (``spin``, ``intra``, ``inter``, ``level``)."""
    import onnxruntime as ort

    settings = ort.SessionOptions()
    if "intra" in options:
        settings.intra_op_num_threads = options["intra"]
    if "inter" in options:
        settings.inter_op_num_threads = options["inter"]
    if "spin" in options:
        settings.add_session_config_entry("session.intra_op.allow_spinning", options["spin"])
    if "level" in options:
        settings.graph_optimization_level = getattr(ort.GraphOptimizationLevel, options["level"])
    return ort.InferenceSession(str(path), settings, providers=["CPUExecutionProvider"])


def onnx_runner(sess: Any) -> Callable[[dict[str, np.ndarray]], Any]:
    names = [i.name for i in sess.get_inputs()]
    return lambda batch: sess.run(None, {n: batch[n] for n in names})


def tf_runner(run: str) -> Callable[[dict[str, np.ndarray]], Any]:
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.modeling.predict import predict_features

    answerer = QuestionAnswerer.load(run, backend="tf")

    def run_tf(batch: dict[str, np.ndarray]) -> Any:
        return predict_features(answerer.model, batch, 1, compile=True)

    return run_tf


def windows_of(onnx_dir: str, data: str, count: int) -> list[dict[str, np.ndarray]]:
    """One ``[1, length]`` int32 batch per window of the first ``count`` dev questions."""
    from qa_finetune.inference.answerer import QuestionAnswerer

    answerer = QuestionAnswerer.load(onnx_dir, backend="onnx")
    pairs = load_pairs(Path(data), count)
    encoding = answerer.windows([p["question"] for p in pairs], [p["context"] for p in pairs])
    columns = encoding.encoding
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in columns]
    return [
        {n: np.asarray([columns[n][row]], dtype=np.int32) for n in names}
        for row in range(len(columns["input_ids"]))
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--onnx", required=True, help="An ONNX export folder (model.onnx).")
    parser.add_argument("--run", help="The run (or model folder) for the TensorFlow row.")
    parser.add_argument("--data", required=True, help="SQuAD v1.1 dev JSON.")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2, help="Passes over the windows.")
    parser.add_argument("--int8", action="store_true", help="Time model.int8.onnx too.")
    args = parser.parse_args()

    from qa_finetune.modeling.formats.onnx import OnnxPredictor, model_file

    path = model_file(Path(args.onnx))
    windows = windows_of(args.onnx, args.data, args.questions)
    ours = OnnxPredictor.load(path)
    runners: dict[str, Callable[[dict[str, np.ndarray]], Any]] = {
        "onnxruntime defaults": onnx_runner(session(path)),
        "qa_finetune OnnxPredictor.load": ours.predict_batch,
        "spinning off": onnx_runner(session(path, spin="0")),
        "intra 1, spinning on": onnx_runner(session(path, intra=1, spin="1")),
        "intra 1, spinning off": onnx_runner(session(path, intra=1, spin="0")),
        "basic graph optimisations, spinning off": onnx_runner(
            session(path, spin="0", level="ORT_ENABLE_BASIC")
        ),
    }
    if args.int8:
        int8 = model_file(Path(args.onnx), quantized=True)
        runners["int8, onnxruntime defaults"] = onnx_runner(session(int8))
        runners["int8, qa_finetune OnnxPredictor.load"] = OnnxPredictor.load(int8).predict_batch
    if args.run:
        runners["tensorflow (compiled graph)"] = tf_runner(args.run)
    times: dict[str, list[float]] = {name: [] for name in runners}
    for run in runners.values():  # warm-up: first passes allocate
        for batch in windows[:3]:
            run(batch)
    # Blocks, not window by window: a session's spinning threads go on spinning for a moment
    # after its pass and would slow whichever session ran next.
    for _ in range(args.rounds):
        for name, run in runners.items():
            for batch in windows:
                began = time.perf_counter()
                run(batch)
                times[name].append((time.perf_counter() - began) * 1000)

    print(machine_line())
    lengths = sorted(int(w["input_ids"].shape[1]) for w in windows)
    print(f"{len(windows)} windows, one a pass, median {lengths[len(lengths) // 2]} tokens\n")
    reference = statistics.median(times.get("tensorflow (compiled graph)", [float("nan")]))
    print("| session | ms per window (median) | p90 | vs TensorFlow |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        median = statistics.median(values)
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        print(f"| {name} | {median:.1f} | {p90:.1f} | {median / reference:.2f}x |")


if __name__ == "__main__":
    main()
