"""F1 against training minutes along one run, from copies of its intermediate checkpoints.

    # while the run trains: copy each new checkpoint of RUN/checkpoints/ into SNAPSHOTS/
    PYTHONPATH=$PWD .venv/bin/python bench/studies/checkpoint_curve.py --run outputs/minilm-31k \
        --snapshots /work/snapshots --data ../shared/data/squad-v1.1-dev.json --limit 2000 \
        --steps 800,1600,2400,3200 --out bench/studies/results/checkpoint_curve.json [--plot F.png]

A run keeps only its latest checkpoint, so the intermediate ones are copies taken while it
trained (``ckpt-N.*`` with ``state-N.json``, whose ``train_seconds`` gives the minutes). Each
is exported as a model folder through a scratch run directory and scored with
``evaluate_model``. These weights are mid-schedule (the learning rate had not decayed yet), so
each point is below what a run given that many minutes would reach: the curve is a lower bound.

``--average 2,3`` also scores the mean of the last 2 (and of the last 3) listed checkpoints'
weights (checkpoint averaging), on the same data.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench._machine import machine_line  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="the run directory (its config.yaml)")
    parser.add_argument("--snapshots", required=True, help="folder of copied checkpoints")
    parser.add_argument("--data", required=True, help="evaluation file")
    parser.add_argument("--limit", type=int, default=None, help="score the first N questions")
    parser.add_argument("--steps", required=True, help="comma-separated checkpoint steps")
    parser.add_argument(
        "--average", default="", help="comma-separated K: also score the last K averaged"
    )
    parser.add_argument("--work", default="/tmp/checkpoint-curve", help="scratch folder")
    parser.add_argument("--out", required=True, help="JSON results file")
    parser.add_argument("--plot", help="also draw the curve (and RUN/history.csv's) to this PNG")
    return parser.parse_args()


def scratch_run(run: Path, snapshots: Path, step: int, work: Path) -> Path:
    """A run directory holding only ``run``'s config and checkpoint ``step``."""
    target = work / f"run-{step}"
    shutil.rmtree(target, ignore_errors=True)
    folder = target / "checkpoints"
    folder.mkdir(parents=True)
    shutil.copy(run / "config.yaml", target / "config.yaml")
    for path in snapshots.glob(f"ckpt-{step}.*"):
        (folder / path.name).symlink_to(path.resolve())
    (folder / "checkpoint").write_text(
        f'model_checkpoint_path: "ckpt-{step}"\nall_model_checkpoint_paths: "ckpt-{step}"\n'
    )
    return target


def averaged_model(folders: list[Path], target: Path) -> Path:
    """The element-wise mean of the weights of ``folders`` (same architecture, checked), saved."""
    from qa_finetune.modeling.interpolation import average_models
    from qa_finetune.modeling.loading import load_qa_model
    from qa_finetune.modeling.reference import load_tokenizer
    from qa_finetune.modeling.saving import save_model_atomic

    mean = average_models([load_qa_model(folder) for folder in folders])
    shutil.rmtree(target, ignore_errors=True)
    return save_model_atomic(mean, load_tokenizer(folders[0]), target)


def score(model: Path, args: argparse.Namespace, config: Any, out: Path) -> dict[str, Any]:
    from qa_finetune.evaluation.evaluate import evaluate_model

    metrics = evaluate_model(
        str(model),
        args.data,
        None,
        report_dir=out,
        max_samples=args.limit,
        max_length=config.preprocess.max_length,
        stride=config.preprocess.stride,
    )
    return {"exact_match": metrics["exact_match"], "f1": metrics["f1"]}


def plot(result: dict[str, Any], history: Path, target: Path) -> None:
    """Evaluation F1 of the checkpoints and the run's monitor F1, against training minutes."""
    import csv

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with history.open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("f1")]
    figure, axis = plt.subplots(figsize=(7, 4))
    axis.plot(
        [float(r["minutes"]) for r in rows],
        [float(r["f1"]) for r in rows],
        label="monitor F1 (the run's validation data)",
        color="tab:gray",
    )
    points = result["checkpoints"]
    limit = f"first {result['limit']} questions of " if result["limit"] else ""
    axis.plot(
        [p["minutes"] for p in points],
        [p["f1"] for p in points],
        "o-",
        label=f"F1 on {limit}{Path(result['data']).name}",
        color="tab:blue",
    )
    axis.set_xlabel("training minutes")
    axis.set_ylabel("F1")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(target, dpi=110)


def main() -> None:
    args = parse_args()
    from qa_finetune.publish.export import export_run
    from qa_finetune.runs.lookup import load_run_config

    run, snapshots, work = Path(args.run), Path(args.snapshots), Path(args.work)
    config = load_run_config(run)
    rows: list[dict[str, Any]] = []
    folders: list[Path] = []
    for step in [int(s) for s in args.steps.split(",")]:
        state = json.loads((snapshots / f"state-{step}.json").read_text())
        folder = export_run(
            scratch_run(run, snapshots, step, work), output=work / f"model-{step}", overwrite=True
        )
        folders.append(folder)
        row = {"step": step, "minutes": round(state["train_seconds"] / 60, 2)}
        row.update(score(folder, args, config, work / f"eval-{step}"))
        print(json.dumps(row), flush=True)
        rows.append(row)
    result: dict[str, Any] = {
        "machine": machine_line(),
        "data": args.data,
        "limit": args.limit,
        "checkpoints": rows,
    }
    result["averages"] = []
    for count in [int(k) for k in args.average.split(",") if k]:
        mean = averaged_model(folders[-count:], work / f"model-average-{count}")
        row = {"steps": [row["step"] for row in rows[-count:]]}
        row.update(score(mean, args, config, work / f"eval-average-{count}"))
        print(json.dumps(row), flush=True)
        result["averages"].append(row)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        plot(result, run / "history.csv", Path(args.plot))


if __name__ == "__main__":
    main()
