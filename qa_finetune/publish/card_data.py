"""What a model card states, as data: the run's measurements, the YAML front matter with its
``model-index`` results, and the recipe and results tables.

A missing or unreadable file yields nothing rather than an error, so an interrupted run can
still be described.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qa_finetune.files.provenance import public_values
from qa_finetune.runs.paths import RunPaths

TAGS = ["question-answering", "extractive-qa", "tensorflow", "qa-finetune"]
# File extensions that the `datasets` loaders know, by loader name (the model-index "type").
_LOADER_BY_SUFFIX = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
_HELD_OUT = re.compile(r"^(.*) \((held-out [^)]*)\)$")
# SQuAD v2 breakdowns from the official script (best_exact_thresh is a threshold, not a score).
_BREAKDOWN_KEYS = ("HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_exact", "best_f1")


@dataclass(frozen=True)
class Measurement:
    """One EM/F1 pair and the data it was measured on."""

    source: str  # "evaluate" or "training"
    exact_match: float
    f1: float
    dataset_name: str
    dataset_type: str
    dataset_config: str | None = None
    dataset_split: str | None = None
    examples: int | None = None
    extra: tuple[tuple[str, float], ...] = ()


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path`` with local paths made public; empty when unreadable."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return public_values(value) if isinstance(value, dict) else {}


def _dataset_ref(value: Any, data: dict[str, Any]) -> tuple[str, str, str | None, str | None]:
    """(name, type, config, split) for a data reference as written by train or evaluate."""
    hub_name = data.get("dataset")
    text = str(value) if value not in (None, "") else None
    if text is None:
        text = hub_name or data.get("validation_file") or data.get("train_file") or "unknown"
    if hub_name and (text == hub_name or text.startswith(f"{hub_name}:")):
        split = text.partition(":")[2] or data.get("validation_split")
        return hub_name, hub_name, data.get("dataset_config"), split
    # train's own validation split reads "<train file> (held-out 10%)".
    held_out = _HELD_OUT.match(text)
    path, split = (held_out.group(1), held_out.group(2)) if held_out else (text, None)
    # Local files: only the file name goes on a public card, never the local path.
    name = Path(path).name or path
    return name, _LOADER_BY_SUFFIX.get(Path(path).suffix.lower(), "local"), None, split


def number(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (booleans included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def find_measurements(run_dir: Path, config: dict[str, dict[str, Any]]) -> list[Measurement]:
    """EM/F1 results of the run: ``eval/metrics.json`` first, then the training metrics."""
    data = config.get("data", {})
    found = []
    sources = [
        ("evaluate", read_json(RunPaths(run_dir).eval_metrics), "data", "total"),
        ("training", read_json(RunPaths(run_dir).metrics), "eval_data", "eval_examples"),
    ]
    for source, metrics, data_key, count_key in sources:
        em, f1 = number(metrics.get("exact_match")), number(metrics.get("f1"))
        if em is None or f1 is None:
            continue
        name, kind, ds_config, split = _dataset_ref(metrics.get(data_key), data)
        count = metrics.get(count_key)
        # SQuAD v2 breakdowns (HasAns_exact, NoAns_f1, ...) are shown but not promoted.
        extra = tuple(
            (key, float(value))
            for key, value in metrics.items()
            if key in _BREAKDOWN_KEYS and number(value) is not None
        )
        found.append(
            Measurement(
                source=source,
                exact_match=em,
                f1=f1,
                dataset_name=name,
                dataset_type=kind,
                dataset_config=ds_config,
                dataset_split=split,
                examples=count if isinstance(count, int) and not isinstance(count, bool) else None,
                extra=extra,
            )
        )
    return found


def front_matter(
    repo_id: str,
    config: dict[str, dict[str, Any]],
    measurement: Measurement | None,
    license: str,
    base: str | None,
) -> dict[str, Any]:
    """The metadata block the Hub reads (``model-index`` holds the headline result)."""
    meta: dict[str, Any] = {"library_name": "transformers", "pipeline_tag": "question-answering"}
    meta["license"] = license
    if base:
        meta["base_model"] = base
    hub_dataset = config.get("data", {}).get("dataset")
    if hub_dataset:
        meta["datasets"] = [hub_dataset]
    meta["language"] = ["en"]
    meta["tags"] = list(TAGS)
    if measurement is not None:
        dataset: dict[str, Any] = {
            "name": measurement.dataset_name,
            "type": measurement.dataset_type,
        }
        if measurement.dataset_config:
            dataset["config"] = measurement.dataset_config
        if measurement.dataset_split:
            dataset["split"] = measurement.dataset_split
        result = {
            "task": {"type": "question-answering", "name": "Extractive Question Answering"},
            "dataset": dataset,
            "metrics": [
                {
                    "type": "exact_match",
                    "value": round(measurement.exact_match, 2),
                    "name": "Exact Match",
                },
                {"type": "f1", "value": round(measurement.f1, 2), "name": "F1"},
            ],
        }
        meta["model-index"] = [{"name": repo_id.rpartition("/")[2], "results": [result]}]
    return meta


def _cell(value: Any) -> str:
    """A markdown table cell: YAML-style scalars, pipes escaped."""
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = str(value).lower()
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def lineage(config: dict[str, dict[str, Any]]) -> list[str]:
    """The "Fine-tuned from" line of a run started from another run (``model.init_from``):
    the parent's name, base model, scores and config hash; nothing for other runs."""
    parent = config.get("parent") or {}
    if not isinstance(parent, dict) or not parent.get("run"):
        return []
    facts = []
    if parent.get("base_model"):
        facts.append(f"base model `{parent['base_model']}`")
    em, f1 = number(parent.get("exact_match")), number(parent.get("f1"))
    if em is not None and f1 is not None:
        facts.append(f"exact match {em:.2f}, F1 {f1:.2f}")
    if parent.get("checkpoint"):
        facts.append(f"its {parent['checkpoint']} weights")
    if parent.get("config_sha256"):
        facts.append(f"config.yaml sha256 `{str(parent['config_sha256'])[:12]}`")
    detail = f" ({'; '.join(facts)})" if facts else ""
    return ["", f"Fine-tuned from the run `{parent['run']}`{detail}, with `--init-from`."]


def distillation(config: dict[str, dict[str, Any]], training: dict[str, Any]) -> list[str]:
    """The "Distilled from" line of a run trained with ``train.method: distill``: its
    teacher, the loss's settings and the teacher's layers it kept; nothing for other runs."""
    train = config.get("train") or {}
    if not isinstance(train, dict) or train.get("method") != "distill":
        return []
    record = training.get("teacher")
    teacher = record if isinstance(record, dict) else {}
    name = teacher.get("run") or teacher.get("reference") or train.get("teacher")
    facts = [
        f"alpha {train.get('distill_alpha')}",
        f"temperature {train.get('distill_temperature')}",
    ]
    layers = training.get("student_layers", train.get("student_layers"))
    if layers is not None:
        facts.append(f"the teacher's encoder layers {layers}")
    if teacher.get("sha256"):
        facts.append(f"teacher weights sha256 `{str(teacher['sha256'])[:12]}`")
    return [
        "",
        f"Distilled from the teacher `{name}` (training method `distill`; {'; '.join(facts)}).",
    ]


def interpolation(run_dir: Path) -> list[str]:
    """The "Weights averaged" line of a run written by ``qa-finetune interpolate`` (from its
    ``interpolation.json``: folder names only, local paths stay private); nothing otherwise."""
    try:  # read as written: only the folders' names are shown
        record = json.loads(RunPaths(run_dir).interpolation.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    weight = number(record.get("weight")) if isinstance(record, dict) else None
    if weight is None:
        return []

    def name(value: Any) -> str:
        path = Path(str(value))
        return path.parent.name if path.name == "model" else path.name

    return [
        "",
        f"Weights averaged, without training: {weight:g} of the fine-tuned run "
        f"`{name(record.get('tuned'))}` and {1 - weight:g} of `{name(record.get('base'))}` "
        "(`qa-finetune interpolate`). The recipe below is the fine-tuned run's; the no-answer "
        "rule was chosen again for these weights on held-out questions.",
    ]


def recipe_table(config: dict[str, dict[str, Any]]) -> list[str]:
    """Markdown table of every ``section.key`` of the resolved config (the parent record only
    for a run that has one)."""
    lines = ["| key | value |", "|---|---|"]
    for section, values in config.items():
        if section == "parent" and not lineage(config):
            continue
        for key, value in values.items():
            lines.append(f"| `{section}.{key}` | {_cell(value)} |")
    return lines


def data_label(m: Measurement) -> str:
    """The data a measurement was made on, with its split when known."""
    return m.dataset_name + (f" ({m.dataset_split})" if m.dataset_split else "")


def results_table(measurements: list[Measurement]) -> list[str]:
    """Markdown tables of EM/F1 per measurement, then any SQuAD v2 breakdowns."""
    lines = ["| measured by | data | examples | exact match | F1 |", "|---|---|---|---|---|"]
    for m in measurements:
        command = (
            "`qa-finetune evaluate`" if m.source == "evaluate" else "validation during training"
        )
        data = data_label(m)
        examples = "" if m.examples is None else str(m.examples)
        lines.append(
            f"| {command} | {_cell(data)} | {examples} | {m.exact_match:.2f} | {m.f1:.2f} |"
        )
    extras = [(m.source, key, value) for m in measurements for key, value in m.extra]
    if extras:
        lines += ["", "| measured by | metric | value |", "|---|---|---|"]
        lines += [f"| {source} | `{key}` | {value:.2f} |" for source, key, value in extras]
    return lines
