"""Document search at 2k, 50k and 500k passages: indexing rate, index size and memory,
retrieval latency, and the latency of `ask --index` against `ask` with the gold paragraph.

    .venv/bin/python bench/retrieval_scale.py --data ../shared/data \\
        --model ../shared/models/minilm-31k --sizes 2000 50000 500000

Each size runs in its own process (so its peak memory is its own). The collection is SQuAD
v1.1 dev (2,067 paragraphs, as a SQuAD file: the questions' gold paragraphs are in every
collection), then the other contexts of the shared data as text files, then generated filler
passages (words drawn with the real contexts' word frequencies, seeded) up to the size asked.
Latencies: the same questions (spread over SQuAD v1.1 dev) answered one at a time, alternating
gold-paragraph (`QuestionAnswerer.answer`), open as `ask --index` reads (`answer_from_collection`:
the best passage, then the other K-1 when it is not confident) and open with all K passages
read at once; the sweep over K reads all at once.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import machine_line

DEV = "squad-v1.1-dev.json"
FILLER_PER_FILE = 200


def contexts_of(path: Path) -> list[str]:
    payload = json.loads(path.read_text(encoding="utf-8"))
    return [p["context"] for a in payload["data"] for p in a["paragraphs"]]


def build_collection(data: Path, size: int, folder: Path, seed: int = 0) -> None:
    """SQuAD v1.1 dev, then other real contexts, then filler, to about ``size`` passages."""
    if (folder / "done").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    (folder / DEV).write_bytes((data / DEV).read_bytes())
    dev = set(contexts_of(data / DEV))
    others = sorted(
        {c for f in sorted(data.glob("*.json")) for c in contexts_of(f) if c not in dev}
    )
    room = max(size - len(dev), 0)
    real = [c.replace("\n\n", "\n") for c in others[:room]]
    _write_texts(folder / "real", real)
    filler = max(room - len(real), 0)
    if filler:
        words = Counter(w for c in others + sorted(dev) for w in c.split())
        vocabulary = list(words)
        weights = np.array(list(words.values()), dtype=np.float64)
        rng = np.random.default_rng(seed)
        # 110 to 190 words: two never fit in one passage of 200, so each is one passage.
        lengths = rng.integers(110, 190, filler)
        # Indices, not a NumPy array of strings: that would be as wide as the longest word.
        drawn = rng.choice(len(vocabulary), size=int(lengths.sum()), p=weights / weights.sum())
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        texts = [
            " ".join(vocabulary[j] for j in drawn[bounds[i] : bounds[i + 1]]) + "."
            for i in range(filler)
        ]
        _write_texts(folder / "filler", texts)
    (folder / "done").write_text("ok")


def _write_texts(folder: Path, texts: list[str]) -> None:
    if not texts:
        return
    folder.mkdir(exist_ok=True)
    for first in range(0, len(texts), FILLER_PER_FILE):
        chunk = texts[first : first + FILLER_PER_FILE]
        (folder / f"{first // FILLER_PER_FILE:06d}.txt").write_text("\n\n".join(chunk) + "\n")


def questions_of(data: Path, count: int) -> list[tuple[str, str]]:
    """(question, gold context) pairs spread over SQuAD v1.1 dev."""
    payload = json.loads((data / DEV).read_text(encoding="utf-8"))
    pairs = [
        (qa["question"], p["context"])
        for a in payload["data"]
        for p in a["paragraphs"]
        for qa in p["qas"]
    ]
    picks = np.linspace(0, len(pairs) - 1, count).round().astype(int)
    return [pairs[i] for i in picks]


def percentiles(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 2),
        "p95": round(float(np.percentile(values, 95)), 2),
    }


def remove_old_index(folder: Path, collection: Path) -> None:
    """Delete a previous run's index of ``collection`` so indexing is timed from scratch.
    Anything else at that path (a user's folder given as --work, a link, an index of other
    documents) is refused, never deleted."""
    import shutil

    from qa_finetune.retrieval.index_files import is_index, read_documents

    if not folder.exists() and not folder.is_symlink():
        return
    refused = f"{folder} exists and is not an index this benchmark wrote: choose another --work"
    if folder.is_symlink() or not is_index(folder):
        sys.exit(refused)
    # The benchmark indexes only its own collection: the first document says whose it is.
    first = next(read_documents(folder), None)
    if first is None or not Path(first.path).is_relative_to(collection.resolve()):
        sys.exit(refused)
    shutil.rmtree(folder)


def build_size(args: argparse.Namespace) -> dict[str, Any]:
    """Make the collection and index it from scratch, timed (in a process of its own)."""
    from qa_finetune.retrieval.building import build_index

    folder = args.work / f"collection-{args.build}"
    build_collection(args.data, args.build, folder)
    index_dir = args.work / f"index-{args.build}"
    remove_old_index(index_dir, folder)
    parts = [folder / DEV, *[folder / d for d in ("real", "filler") if (folder / d).exists()]]
    summary = build_index(parts, index_dir)
    return {
        "documents": summary.documents,
        "index_seconds": round(summary.seconds, 1),
        "passages_per_second": round(summary.passages / summary.seconds, 1),
        "peak_rss_mb_indexing": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def one_size(args: argparse.Namespace) -> dict[str, Any]:
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.inference.open_answers import answer_from_collection
    from qa_finetune.retrieval.passage_index import PassageIndex

    index_dir = args.work / f"index-{args.one}"
    size_mb = sum(p.stat().st_size for p in index_dir.rglob("*") if p.is_file()) / 2**20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    began = time.perf_counter()
    index = PassageIndex.open(index_dir)
    open_s = time.perf_counter() - began
    after_open = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    pairs = questions_of(args.data, args.questions)
    search_ms = []
    for question, _ in pairs:
        t = time.perf_counter()
        index.search(question, 5)
        search_ms.append(1000 * (time.perf_counter() - t))
    row: dict[str, Any] = {
        "passages": len(index),
        "index_mb": round(size_mb, 1),
        "open_seconds": round(open_s, 2),
        "peak_rss_mb_before_open": round(before, 1),
        "peak_rss_mb_after_open": round(after_open, 1),
        "retrieval_ms": percentiles(search_ms),
    }
    if args.model:
        answerer = QuestionAnswerer.load(args.model)
        readers = pairs[: args.read_questions]
        answerer.answer(*readers[0])  # warm: the first call traces the model
        answer_from_collection(answerer, index, [readers[0][0]], args.top_passages)
        gold_ms, open_ms, all_ms = [], [], []
        for question, context in readers:
            t = time.perf_counter()
            answerer.answer(question, context)
            gold_ms.append(1000 * (time.perf_counter() - t))
            t = time.perf_counter()
            answer_from_collection(answerer, index, [question], args.top_passages)
            open_ms.append(1000 * (time.perf_counter() - t))
            t = time.perf_counter()  # every passage read at once, without the first step
            answer_from_collection(answerer, index, [question], args.top_passages, 1, False, None)
            all_ms.append(1000 * (time.perf_counter() - t))
        row["gold_ask_ms"] = percentiles(gold_ms)
        row["open_ask_ms"] = percentiles(open_ms)
        row["open_ask_all_at_once_ms"] = percentiles(all_ms)
        row["open_over_gold_p50"] = round(row["open_ask_ms"]["p50"] / row["gold_ask_ms"]["p50"], 2)
        if args.k_sweep:
            sweep = {}
            for k in (1, 3, 5, 10, 20):
                times = []
                for question, _ in readers[:20]:
                    t = time.perf_counter()
                    answer_from_collection(answerer, index, [question], k, 1, False, None)
                    times.append(1000 * (time.perf_counter() - t))
                sweep[k] = round(statistics.median(times), 1)
            row["open_ask_ms_p50_by_k"] = sweep
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", default=None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 50000, 500000])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--read-questions", type=int, default=40)
    parser.add_argument("--top-passages", type=int, default=5)
    parser.add_argument("--k-sweep-at", type=int, default=50000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/qa-finetune-retrieval-bench"))
    parser.add_argument("--output", type=Path, default=Path("bench/results/retrieval_scale.json"))
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--build", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--k-sweep", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build is not None:
        print(json.dumps(build_size(args)))
        return
    if args.one is not None:
        print(json.dumps(one_size(args)))
        return
    rows = []
    print(machine_line())
    for size in args.sizes:
        built = _child(
            [
                sys.executable,
                __file__,
                "--data",
                str(args.data),
                "--build",
                str(size),
                "--work",
                str(args.work),
            ],
            size,
        )
        command = [sys.executable, __file__, "--data", str(args.data), "--one", str(size)]
        command += [
            "--questions",
            str(args.questions),
            "--read-questions",
            str(args.read_questions),
        ]
        command += ["--top-passages", str(args.top_passages), "--work", str(args.work)]
        command += ["--model", args.model] if args.model else []
        command += ["--k-sweep"] if size == args.k_sweep_at else []
        row = {**built, **_child(command, size)}
        print(json.dumps({"size": size, **row}))
        rows.append({"size": size, **row})
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"machine": machine_line(), "rows": rows}, indent=2) + "\n")
    picture(rows, args.output.with_suffix(".png"))


def _child(command: list[str], size: int) -> dict[str, Any]:
    """Run one step in a fresh process; its last line is its JSON row."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"size {size} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def picture(rows: list[dict[str, Any]], path: Path) -> None:
    """Retrieval and open-ask latency (p50) against the number of passages."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    passages = [r["passages"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(passages, [r["retrieval_ms"]["p50"] for r in rows], "o-", label="retrieval (top 5)")
    if all("open_ask_ms" in r for r in rows):
        ax.plot(
            passages, [r["open_ask_ms"]["p50"] for r in rows], "s-", label="ask --index (read 5)"
        )
        ax.plot(
            passages, [r["gold_ask_ms"]["p50"] for r in rows], "^--", label="ask, gold paragraph"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("passages in the index")
    ax.set_ylabel("ms per question (p50)")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
