"""The README.md model card of a pushed run, built from the files in its run directory.

The card is YAML front matter (read by the Hub for the widget, search and the results panel)
followed by a markdown body. Everything comes from ``config.yaml``, ``metrics.json`` and, when
``qa-finetune evaluate`` was run, ``eval/metrics.json``; a missing file leaves its part out
rather than failing, so an interrupted run can still be described.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from qa_finetune.config import DEFAULT_MODEL
from qa_finetune.core.hub_ids import is_hub_id
from qa_finetune.publish.public_paths import public_values
from qa_finetune.runs.lookup import recorded_config

# The embedded default model is a packaged copy of a Hub model: the card names the original.
KNOWN_BASE_MODELS = {DEFAULT_MODEL: "sentence-transformers/all-MiniLM-L6-v2"}

DEFAULT_LICENSE = "apache-2.0"
TAGS = ["question-answering", "extractive-qa", "tensorflow", "qa-finetune"]

# A Hub model id: an optional namespace, then a name; no path-like prefixes.
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


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path`` with local paths made public; empty when unreadable."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return public_values(value) if isinstance(value, dict) else {}


def base_model_id(name_or_path: str | None) -> str | None:
    """The Hub id of the base model, or None for a local checkpoint."""
    if not name_or_path:
        return None
    name = KNOWN_BASE_MODELS.get(name_or_path, name_or_path)
    return name if is_hub_id(name) else None


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


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def find_measurements(run_dir: Path, config: dict[str, dict[str, Any]]) -> list[Measurement]:
    """EM/F1 results of the run: ``eval/metrics.json`` first, then the training metrics."""
    data = config.get("data", {})
    found = []
    sources = [
        ("evaluate", _read_json(run_dir / "eval" / "metrics.json"), "data", "total"),
        ("training", _read_json(run_dir / "metrics.json"), "eval_data", "eval_examples"),
    ]
    for source, metrics, data_key, count_key in sources:
        em, f1 = _number(metrics.get("exact_match")), _number(metrics.get("f1"))
        if em is None or f1 is None:
            continue
        name, kind, ds_config, split = _dataset_ref(metrics.get(data_key), data)
        count = metrics.get(count_key)
        # SQuAD v2 breakdowns (HasAns_exact, NoAns_f1, ...) are shown but not promoted.
        extra = tuple(
            (key, float(value))
            for key, value in metrics.items()
            if key in _BREAKDOWN_KEYS and _number(value) is not None
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


def _front_matter(
    repo_id: str,
    config: dict[str, dict[str, Any]],
    measurement: Measurement | None,
    license: str,
    base: str | None,
) -> dict[str, Any]:
    """The metadata block the Hub reads."""
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


def _recipe_table(config: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| key | value |", "|---|---|"]
    for section, values in config.items():
        for key, value in values.items():
            lines.append(f"| `{section}.{key}` | {_cell(value)} |")
    return lines


def _data_label(m: Measurement) -> str:
    return m.dataset_name + (f" ({m.dataset_split})" if m.dataset_split else "")


def _results_table(measurements: list[Measurement]) -> list[str]:
    lines = ["| measured by | data | examples | exact match | F1 |", "|---|---|---|---|---|"]
    for m in measurements:
        command = (
            "`qa-finetune evaluate`" if m.source == "evaluate" else "validation during training"
        )
        data = _data_label(m)
        examples = "" if m.examples is None else str(m.examples)
        lines.append(
            f"| {command} | {_cell(data)} | {examples} | {m.exact_match:.2f} | {m.f1:.2f} |"
        )
    extras = [(m.source, key, value) for m in measurements for key, value in m.extra]
    if extras:
        lines += ["", "| measured by | metric | value |", "|---|---|---|"]
        lines += [f"| {source} | `{key}` | {value:.2f} |" for source, key, value in extras]
    return lines


def _summary(
    repo_id: str,
    config: dict[str, dict[str, Any]],
    training: dict[str, Any],
    measurement: Measurement | None,
    base: str | None,
) -> list[str]:
    model = config.get("model", {}).get("name_or_path")
    if base:
        start = f"a fine-tuned version of [{base}](https://huggingface.co/{base})"
    elif model:
        start = f"a fine-tuned version of the local checkpoint `{Path(str(model)).name}`"
    else:
        start = "a fine-tuned transformer encoder"
    data = config.get("data", {})
    if data.get("dataset"):
        trained_on = (
            f"the [{data['dataset']}](https://huggingface.co/datasets/{data['dataset']}) dataset"
        )
    else:
        files = [
            Path(str(f)).name for f in (data.get("train_file"), data.get("validation_file")) if f
        ]
        trained_on = ", ".join(f"`{f}`" for f in files) if files else "local data"
    lines = [
        f"`{repo_id}` is {start} for extractive question answering (TensorFlow weights), "
        f"trained on {trained_on} with `qa-finetune`."
    ]
    if measurement is not None:
        lines += [
            "",
            f"It reaches **{measurement.exact_match:.2f} exact match** and "
            f"**{measurement.f1:.2f} F1** on {_data_label(measurement)}.",
        ]
    facts = []
    if _number(training.get("epochs")) is not None:
        facts.append(f"{training['epochs']:g} epochs")
    if isinstance(training.get("steps"), int):
        facts.append(f"{training['steps']} steps")
    if _number(training.get("train_seconds")) is not None:
        facts.append(f"{training['train_seconds'] / 60:.1f} minutes")
    if training.get("kept_model") == "last":
        facts.append("final weights kept")
    elif training.get("best_epoch") is not None:
        facts.append(f"best epoch {training['best_epoch']}")
    if facts:
        lines += ["", "Training: " + ", ".join(facts) + "."]
    return lines


def _limitations(config: dict[str, dict[str, Any]]) -> list[str]:
    preprocess = config.get("preprocess", {})
    inference = config.get("inference", {})
    lines = [
        "- Extractive only: every answer is a span copied from the given context. The model "
        "cannot answer without a context, combine facts from several passages into new text, "
        "or answer yes/no questions that the context does not spell out.",
    ]
    if config.get("data", {}).get("version_2_with_negative"):
        threshold = inference.get("null_score_diff_threshold", 0.0)
        lines.append(
            "- Trained with unanswerable questions (SQuAD v2 style): it returns an empty answer "
            f"when the no-answer score beats the best span by more than {threshold}."
        )
    else:
        lines.append(
            "- Not trained with unanswerable questions: it always returns some span, even when "
            "the context holds no answer. Check the score before trusting an answer."
        )
    if preprocess.get("max_length"):
        lines.append(
            f"- Long contexts are read in windows of {preprocess['max_length']} tokens "
            f"overlapping by {preprocess.get('stride', 0)}; answers longer than "
            f"{inference.get('max_answer_length', 30)} tokens are never predicted."
        )
    lines.append(
        "- English text only; quality drops on domains far from the training data. Answers "
        "inherit any errors and biases of the training data."
    )
    return lines


def _usage(repo_id: str, has_pytorch: bool, has_tf: bool = True) -> list[str]:
    """Snippets for the weights the model has: PyTorch first, then TensorFlow, then the CLI."""
    question = (
        'qa(question="Who wrote the report?", context="The report was written by Ada in 1843.")'
    )
    lines: list[str] = []
    if has_pytorch:
        lines += [
            "With `transformers` and PyTorch (`model.safetensors` holds PyTorch weights):",
            "",
            "```python",
            "from transformers import pipeline",
            "",
            f'qa = pipeline("question-answering", model="{repo_id}")',
            question,
            "```",
            "",
        ]
    if has_tf and has_pytorch:
        lines += [
            "With `transformers` 4.x and TensorFlow (`tf_model.h5`):",
            "",
            "```python",
            "from transformers import pipeline",
            "",
            "# use_safetensors=False picks tf_model.h5: transformers' TF loader cannot read the",
            "# PyTorch safetensors file. Without PyTorch installed, also pass dtype=None.",
            f'qa = pipeline("question-answering", model="{repo_id}", framework="tf",',
            '              model_kwargs={"use_safetensors": False})',
            question,
            "```",
            "",
        ]
    elif has_tf:
        lines += [
            "With `transformers` (4.x) and TensorFlow installed:",
            "",
            "```python",
            "from transformers import pipeline",
            "",
            "# TensorFlow weights, hence framework='tf'. Without PyTorch installed,",
            "# also pass dtype=None.",
            f'qa = pipeline("question-answering", model="{repo_id}", framework="tf")',
            question,
            "```",
            "",
        ]
    return [
        *lines,
        "With `qa-finetune`:",
        "",
        "```bash",
        'qa-finetune ask "Who wrote the report?" \\',
        '  --context "The report was written by Ada in 1843." \\',
        f"  --model {repo_id}",
        "```",
    ]


def _architecture(run_dir: Path) -> list[str]:
    """The model class and type from ``model/config.json`` (nothing when it is unreadable)."""
    model_config = _read_json(run_dir / "model" / "config.json")
    architectures = model_config.get("architectures")
    if not isinstance(architectures, list) or not architectures:
        return []
    model_type = model_config.get("model_type")
    kind = f" (model type `{model_type}`)" if isinstance(model_type, str) else ""
    return ["", f"Architecture: `{architectures[0]}`{kind}."]


def build_model_card(run_dir: Path, repo_id: str, *, license: str = DEFAULT_LICENSE) -> str:
    """The README.md text (front matter + body) describing the run in ``run_dir``."""
    run_dir = Path(run_dir)
    raw_config = recorded_config(run_dir)
    # Told apart before paths are made public: "/models/encoder" is local, "encoder" is not.
    base = base_model_id(raw_config.get("model", {}).get("name_or_path"))
    # The whole card is public: the recipe holds local data and output paths.
    config = public_values(raw_config)
    training = _read_json(run_dir / "metrics.json")
    measurements = find_measurements(run_dir, config)
    headline = measurements[0] if measurements else None

    meta = _front_matter(repo_id, config, headline, license, base)
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    body = [f"# {repo_id.rpartition('/')[2]}", ""]
    body += _summary(repo_id, config, training, headline, base)
    body += _architecture(run_dir)
    body += ["", "## Training recipe", ""]
    if config:
        body += ["The resolved configuration of the run (`training/config.yaml`):", ""]
        body += _recipe_table(config)
    else:
        body.append("The run directory had no `config.yaml`.")
    body += ["", "## Results", ""]
    if measurements:
        body += _results_table(measurements)
    else:
        body.append("No evaluation metrics were found in the run directory.")
    body += ["", "## Intended use and limitations", ""]
    body.append(
        "Intended for finding the answer to a question inside a passage of text supplied "
        "with it (reading comprehension, document question answering)."
    )
    body += ["", *_limitations(config)]
    model_dir = run_dir / "model"
    has_pytorch = (model_dir / "model.safetensors").is_file()
    # A run without model/ (a card previewed early) gets the TensorFlow snippet, as before.
    has_tf = (model_dir / "tf_model.h5").is_file() or not has_pytorch
    body += ["", "## How to use", "", *_usage(repo_id, has_pytorch, has_tf)]
    return f"---\n{front}---\n\n" + "\n".join(body) + "\n"
