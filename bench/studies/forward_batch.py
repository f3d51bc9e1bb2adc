"""Model time per window against the number of windows per forward pass (the batching gain).

    .venv/bin/python bench/studies/forward_batch.py --model outputs/demo \\
        --data ../shared/data/squad-v1.1-dev.json

The windows of the first ``--windows`` SQuAD dev questions (each with its own paragraph) go
through ``QuestionAnswerer.predict_windows`` (the compiled graph, length-sorted batches each
padded to its own longest window) with batch sizes 1 to 64, the sizes interleaved in each of
``--repeats`` rounds. This is the ceiling on what the server's micro-batching can gain: it
groups requests into exactly these passes.

With ``--padded 128,192,256,384`` it times made-up windows of those padded lengths instead, as
the server's batch-size profile does (``modeling/batch_profile``), every (length, batch size)
interleaved in each round: whether the profile's choice holds at the lengths in between.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._machine import machine_line
from bench.serve_load import load_pairs
from qa_finetune.inference.answerer import QuestionAnswerer

SIZES = (1, 2, 4, 8, 16, 32, 64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument(
        "--windows", type=int, default=64, help="Questions (about one window each)."
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--padded", help="Made-up windows of these lengths, e.g. 128,384.")
    args = parser.parse_args()
    if args.padded:
        padded_lengths(args.model, [int(x) for x in args.padded.split(",")], args.repeats)
        return

    pairs = load_pairs(Path(args.data), args.windows)
    answerer = QuestionAnswerer.load(args.model)
    windows = answerer.windows([p["question"] for p in pairs], [p["context"] for p in pairs])
    encoding = windows.encoding
    count = len(encoding["input_ids"])
    answerer.predict_windows(encoding, compile=True)  # trace the graph once
    times: dict[int, list[float]] = {size: [] for size in SIZES}
    for _ in range(args.repeats):
        for size in SIZES:
            answerer.settings = dataclasses.replace(answerer.settings, batch_size=size)
            began = time.perf_counter()
            answerer.predict_windows(encoding, compile=True)
            times[size].append((time.perf_counter() - began) / count * 1000)
    print(machine_line())
    lengths = sorted(map(len, encoding["input_ids"]))
    print(f"{count} windows, median {lengths[len(lengths) // 2]} tokens, model {args.model}\n")
    print("| windows per pass | ms per window (median) | runs | vs 1 per pass |")
    print("|---:|---:|---|---:|")
    single = statistics.median(times[1])
    for size in SIZES:
        median = statistics.median(times[size])
        runs = ", ".join(f"{t:.1f}" for t in times[size])
        print(f"| {size} | {median:.1f} | {runs} | {single / median:.2f}x |")


def padded_lengths(model: str, lengths: list[int], repeats: int) -> None:
    """Median ms per window of made-up windows by padded length and batch size."""
    from qa_finetune.modeling.batch_profile import model_pass

    answerer = QuestionAnswerer.load(model)
    names = tuple(answerer.tokenizer.model_input_names)
    run_pass = model_pass(answerer.model, answerer.tokenizer, names)
    sizes = [size for size in SIZES if size <= 16]  # past 16 a CPU pass only grows dearer
    shapes = [(size, length) for length in lengths for size in sizes]
    for shape in shapes:  # each shape's graph traced outside the timing
        run_pass(*shape)
    times: dict[tuple[int, int], list[float]] = {shape: [] for shape in shapes}
    for _ in range(repeats):
        for size, length in shapes:
            began = time.perf_counter()
            run_pass(size, length)
            times[size, length].append((time.perf_counter() - began) / size * 1000)
    print(machine_line())
    print(f"made-up windows, model {model}, median of {repeats} interleaved rounds (least-most)\n")
    print("| padded length | " + " | ".join(f"{size} a pass" for size in sizes) + " |")
    print("|---:|" + "---:|" * len(sizes))
    for length in lengths:
        cells = [
            f"{statistics.median(t):.1f} ({min(t):.0f}-{max(t):.0f})"
            for t in (times[size, length] for size in sizes)
        ]
        print(f"| {length} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
