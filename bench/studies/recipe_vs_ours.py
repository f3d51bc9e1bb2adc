"""The original recipe against ours: same model, same data, same seed, same training time.

    nice .venv/bin/python bench/studies/recipe_vs_ours.py --minutes 45   # train, score, report
    .venv/bin/python bench/studies/recipe_vs_ours.py --minutes 45 --skip-train  # score, report

1. Train ``configs/recipe-original-minilm.yaml`` (the notebook's recipe: windows padded to 400
   tokens, shuffled, constant Adam 3e-5, batch 32) and ``configs/minilm-31k.yaml`` (ours:
   length-bucketed batches of 16, AdamW 1e-4 with warm-up and linear decay to zero along the
   time budget) with ``train.max_minutes`` set to the same budget. The two run *at the same
   time, each pinned to its own CPU core* with one TensorFlow thread: whatever else the machine
   does slows both alike, which back-to-back runs on a shared machine cannot promise.
2. Score both final models on SQuAD v1.1 dev with (a) our n-best decoding over strided windows
   and (b) the notebook's ``get_answer`` (one truncated window, argmax start and end).
3. Write ``bench/studies/results/recipe_vs_ours.json``, the learning curves of both in one picture
   (``bench/studies/results/recipe_vs_ours.png``) and a markdown table on stdout.

TyDi QA English dev (not SQuAD) is each run's monitor; nothing is chosen by SQuAD dev score.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402

RECIPES = {
    "original recipe": ROOT / "configs" / "recipe-original-minilm.yaml",
    "ours": ROOT / "configs" / "minilm-31k.yaml",
}
RESULTS = ROOT / "bench" / "studies" / "results"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=45.0, help="training budget of each")
    parser.add_argument("--output-dir", default=str(ROOT / "outputs" / "recipe-vs-ours"))
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--limit", type=int, default=None, help="score the first N dev questions")
    parser.add_argument("--skip-train", action="store_true", help="reuse the trained runs")
    parser.add_argument("--skip-score", action="store_true", help="reuse the stored scores")
    return parser.parse_args()


def run_name(label: str) -> str:
    return "original" if label != "ours" else "ours"


def pinned_env() -> dict[str, str]:
    """One thread everywhere, so a process pinned to one core does not oversubscribe it."""
    env = dict(os.environ)
    env.update(
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
        OMP_NUM_THREADS="1",
        RAYON_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
    )
    return env


def launch_pinned(command: list[str], core: int, log: Path) -> subprocess.Popen[bytes]:
    """Start ``command`` on CPU ``core`` (taskset), its output into ``log``."""
    cores = os.sched_getaffinity(0)
    prefix = ["taskset", "-c", str(core)] if len(cores) > 1 else []
    with log.open("wb") as handle:
        return subprocess.Popen(
            prefix + command, stdout=handle, stderr=subprocess.STDOUT, env=pinned_env()
        )


def train_both(args: argparse.Namespace, out: Path) -> None:
    """Both trainings at once, one core each; fails loudly if either fails."""
    data = Path(args.data)
    train_files = ",".join(
        str(data / name)
        for name in (
            "squadshifts-new-wiki.json",
            "squadshifts-amazon.json",
            "squadshifts-reddit.json",
            "tydiqa-goldp-en-train.json",
        )
    )
    processes = []
    for core, (label, config) in enumerate(RECIPES.items()):
        command = [
            sys.executable, "-m", "qa_finetune", "train",
            "--config", str(config),
            "--train-file", train_files,
            "--validation-file", str(data / "tydiqa-goldp-en-dev.json"),
            "--set", f"train.max_minutes={args.minutes}",
            "--set", f"train.output_dir={out}",
            "--set", f"train.run_name={run_name(label)}",
            "--set", "train.tensorboard=false",
            "--overwrite",
        ]  # fmt: skip
        log = out / f"{run_name(label)}.train.log"
        print(f"training {label} on core {core}: {shlex.join(command)}  (log: {log})", flush=True)
        processes.append((label, launch_pinned(command, core, log)))
    for label, process in processes:
        if process.wait() != 0:
            sys.exit(f"error: training '{label}' failed; see {out / run_name(label)}.train.log")


def score_one(run_dir: Path, data: Path, limit: int | None, result: Path) -> None:
    """(a) our decoding and (b) the notebook's on SQuAD v1.1 dev, for one run's model/."""
    from bench.accuracy import decode_notebook, decode_ours, timed
    from qa_finetune.evaluation.evaluate import load_examples
    from qa_finetune.inference.answerer import QuestionAnswerer
    from qa_finetune.metrics import squad_v1
    from qa_finetune.modeling.scoring import references

    records = load_examples(str(data), None, max_samples=limit).records
    answerer = QuestionAnswerer.load(str(run_dir))
    gold = references(records)
    scores: dict[str, Any] = {}
    for name, decode in (("ours", decode_ours), ("notebook", decode_notebook)):
        seconds, predictions = timed(lambda decode=decode: decode(answerer, records))
        scores[name] = {**squad_v1(predictions, gold), "seconds": round(seconds, 1)}
        print(f"{run_dir.name}: {name} decoding F1 {scores[name]['f1']:.2f}", flush=True)
    scores["max_length"] = answerer.spec.max_length
    scores["stride"] = answerer.spec.stride
    result.write_text(json.dumps(scores, indent=2), encoding="utf-8")


def score_both(args: argparse.Namespace, out: Path) -> None:
    """Score the two models at once, one core each (same conditions as their training)."""
    dev = Path(args.data) / "squad-v1.1-dev.json"
    processes = []
    for core, label in enumerate(RECIPES):
        name = run_name(label)
        command = [
            sys.executable, str(Path(__file__).resolve()), "--score-one", str(out / name),
            "--data", str(dev), "--result", str(out / f"{name}.scores.json"),
        ] + (["--limit", str(args.limit)] if args.limit else [])  # fmt: skip
        processes.append((label, launch_pinned(command, core, out / f"{name}.score.log")))
    for label, process in processes:
        if process.wait() != 0:
            sys.exit(f"error: scoring '{label}' failed; see {out / run_name(label)}.score.log")


def read_history(run_dir: Path) -> list[dict[str, float]]:
    with (run_dir / "history.csv").open(encoding="utf-8") as handle:
        return [{k: float(v) for k, v in row.items() if v} for row in csv.DictReader(handle)]


def summarise(out: Path, label: str) -> dict[str, Any]:
    """Steps, tokens/s, monitor curve and dev scores of one run."""
    import yaml

    run_dir = out / run_name(label)
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    batch = config["train"]["batch_size"]
    seconds = metrics["train_seconds"]
    windows = metrics["steps"] * batch
    row = {
        "label": label,
        "steps": metrics["steps"],
        "batch_size": batch,
        "windows_trained": windows,
        "epochs": metrics["epochs"],
        "train_minutes": round(seconds / 60, 1),
        "real_tokens_per_s": round(windows * metrics["mean_window_tokens"] / seconds),
        "fed_tokens_per_s": round(
            windows
            * (
                config["preprocess"]["max_length"]
                if config["train"].get("pad_to_max_length")
                else metrics["mean_window_tokens"]
            )
            / seconds
        ),
        "monitor_f1": metrics["f1"],
        "history": read_history(run_dir),
    }
    scores = out / f"{run_name(label)}.scores.json"
    if scores.is_file():
        row["squad_dev"] = json.loads(scores.read_text(encoding="utf-8"))
    return row


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """TyDi dev F1 and training loss against training minutes, both runs in one figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (loss_axis, f1_axis) = plt.subplots(1, 2, figsize=(11, 4))
    for row in rows:
        minutes = [h["minutes"] for h in row["history"]]
        loss_axis.plot(minutes, [h["loss"] for h in row["history"]], marker="o", label=row["label"])
        f1_axis.plot(minutes, [h.get("f1") for h in row["history"]], marker="o", label=row["label"])
    loss_axis.set(xlabel="training minutes", ylabel="training loss", title="Training loss")
    f1_axis.set(xlabel="training minutes", ylabel="F1", title="TyDi QA English dev F1 (monitor)")
    for axis in (loss_axis, f1_axis):
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def report(args: argparse.Namespace, out: Path) -> None:
    rows = [summarise(out, label) for label in RECIPES]
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(rows, RESULTS / "recipe_vs_ours.png")
    record = {"minutes": args.minutes, "machine": machine_line(), "runs": rows}
    (RESULTS / "recipe_vs_ours.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    print(f"\n# Original recipe vs ours, {args.minutes:g} training minutes each\n")
    print(
        "| recipe | steps x batch | epochs | real tokens/s | fed tokens/s | TyDi dev F1 | "
        "SQuAD v1.1 dev EM / F1, (a) our decoding | (b) notebook decoding |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        dev = row.get("squad_dev")

        def cell(name: str, dev: Any = dev) -> str:
            return f"{dev[name]['exact_match']:.2f} / {dev[name]['f1']:.2f}" if dev else "–"

        print(
            f"| {row['label']} | {row['steps']:,} x {row['batch_size']} | {row['epochs']:.2f} | "
            f"{row['real_tokens_per_s']:,} | {row['fed_tokens_per_s']:,} | "
            f"{row['monitor_f1']:.2f} | {cell('ours')} | {cell('notebook')} |"
        )
    print(f"\n{machine_line()}")
    print(f"Command: python bench/studies/recipe_vs_ours.py {shlex.join(sys.argv[1:])}")


def main() -> None:
    if "--score-one" in sys.argv:
        parser = argparse.ArgumentParser()
        parser.add_argument("--score-one", required=True)
        parser.add_argument("--data", required=True)
        parser.add_argument("--result", required=True)
        parser.add_argument("--limit", type=int, default=None)
        one = parser.parse_args()
        score_one(Path(one.score_one), Path(one.data), one.limit, Path(one.result))
        return
    args = parse_args()
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    began = time.time()
    if not args.skip_train:
        train_both(args, out)
    if not args.skip_score:
        score_both(args, out)
    report(args, out)
    print(f"wall time: {(time.time() - began) / 60:.1f} min")


if __name__ == "__main__":
    main()
