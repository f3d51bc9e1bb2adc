"""The README.md model card of a pushed run, built from the files in its run directory.

The card is YAML front matter (read by the Hub for the widget, search and the results panel)
followed by a markdown body. Everything comes from ``config.yaml``, ``metrics.json`` and, when
``qa-finetune evaluate`` was run, ``eval/metrics.json``; a missing file leaves its part out
rather than failing, so an interrupted run can still be described. This module writes the
prose; the measurements, front matter and tables come from ``publish/card_data``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from qa_finetune.calibration.confidence import CORRECT_MEANS
from qa_finetune.calibration.logistic import CalibrationError
from qa_finetune.config import DEFAULT_MODEL
from qa_finetune.config.hub_ids import is_hub_id
from qa_finetune.files.provenance import public_values
from qa_finetune.publish.card_data import (
    Measurement,
    data_label,
    distillation,
    find_measurements,
    front_matter,
    interpolation,
    lineage,
    number,
    read_json,
    recipe_table,
    results_table,
)
from qa_finetune.runs.calibration_file import read_calibration
from qa_finetune.runs.lookup import recorded_config
from qa_finetune.runs.paths import RunPaths

# The embedded default model is a packaged copy of a Hub model: the card names the original.
KNOWN_BASE_MODELS = {DEFAULT_MODEL: "sentence-transformers/all-MiniLM-L6-v2"}

DEFAULT_LICENSE = "apache-2.0"


def base_model_id(name_or_path: str | None) -> str | None:
    """The Hub id of the base model, or None for a local checkpoint."""
    if not name_or_path:
        return None
    name = KNOWN_BASE_MODELS.get(name_or_path, name_or_path)
    return name if is_hub_id(name) else None


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
            f"**{measurement.f1:.2f} F1** on {data_label(measurement)}.",
        ]
    facts = []
    if number(training.get("epochs")) is not None:
        facts.append(f"{training['epochs']:g} epochs")
    if isinstance(training.get("steps"), int):
        facts.append(f"{training['steps']} steps")
    if number(training.get("train_seconds")) is not None:
        facts.append(f"{training['train_seconds'] / 60:.1f} minutes")
    step = _kept_step(training)
    at = f" (step {step})" if step is not None else ""
    if training.get("kept_model") == "last":
        facts.append(f"final weights kept{at}")
    elif number(training.get("best_epoch")) is not None:
        facts.append(f"best checkpoint: epoch {training['best_epoch']:g}{at}")
    if facts:
        lines += ["", "Training: " + ", ".join(facts) + "."]
    return lines


def _kept_step(training: dict[str, Any]) -> int | None:
    """The step of the weights in ``model/``: the best validation's, or the last one."""
    step = training.get("steps" if training.get("kept_model") == "last" else "best_step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _limitations(config: dict[str, dict[str, Any]], training: dict[str, Any]) -> list[str]:
    preprocess = config.get("preprocess", {})
    inference = config.get("inference", {})
    lines = [
        "- Extractive only: every answer is a span copied from the given context. The model "
        "cannot answer without a context, combine facts from several passages into new text, "
        "or answer yes/no questions that the context does not spell out.",
    ]
    rule = training.get("no_answer_rule")
    if config.get("data", {}).get("allow_no_answer") or rule:
        threshold = inference.get("no_answer_threshold", 0.0)
        chosen = ""
        if training.get("no_answer_threshold") is not None:
            threshold = round(float(training["no_answer_threshold"]), 4)
            chosen = " (chosen for the best F1 on held-out questions)"
        if rule == "classifier":
            how = (
                "a logistic classifier on the reader's own outputs (null and span scores, their "
                "gaps and probabilities, the number of windows; `no_answer_rule.json`) gives "
                f"log-odds of no answer above {threshold}{chosen}"
            )
        else:
            how = f"the no-answer score beats the best span by more than {threshold}{chosen}"
        trained = config.get("data", {}).get("allow_no_answer")
        head = (
            "Trained with unanswerable questions" if trained else "Decides when there is no answer"
        )
        lines.append(f"- {head} (SQuAD v2 style): it returns an empty answer when {how}.")
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
            "# use_safetensors=False picks tf_model.h5 (transformers' TF loader cannot read the",
            "# PyTorch safetensors file); dtype=None: no PyTorch dtype (works without PyTorch).",
            f'qa = pipeline("question-answering", model="{repo_id}", framework="tf",',
            '              model_kwargs={"use_safetensors": False}, dtype=None)',
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
            "# TensorFlow weights, hence framework='tf'; dtype=None: no PyTorch dtype (works",
            "# without PyTorch).",
            f'qa = pipeline("question-answering", model="{repo_id}", framework="tf", dtype=None)',
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
    model_config = read_json(RunPaths(run_dir).model / "config.json")
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
    training = read_json(RunPaths(run_dir).metrics)
    measurements = find_measurements(run_dir, config)
    headline = measurements[0] if measurements else None

    meta = front_matter(repo_id, config, headline, license, base)
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    body = [f"# {repo_id.rpartition('/')[2]}", ""]
    body += _summary(repo_id, config, training, headline, base)
    body += lineage(config)
    body += distillation(config, training or {})
    body += interpolation(run_dir)
    body += _architecture(run_dir)
    body += ["", "## Training recipe", ""]
    if config:
        body += ["The resolved configuration of the run (`training/config.yaml`):", ""]
        body += recipe_table(config)
    else:
        body.append("The run directory had no `config.yaml`.")
    body += ["", "## Results", ""]
    if measurements:
        body += results_table(measurements)
    else:
        body.append("No evaluation metrics were found in the run directory.")
    body += ["", "## Intended use and limitations", ""]
    body.append(
        "Intended for finding the answer to a question inside a passage of text supplied "
        "with it (reading comprehension, document question answering)."
    )
    body += ["", *_limitations(config, training or {}), *confidence_lines(run_dir)]
    model_dir = RunPaths(run_dir).model
    has_pytorch = (model_dir / "model.safetensors").is_file()
    # A run without model/ (a card previewed early) gets the TensorFlow snippet, as before.
    has_tf = (model_dir / "tf_model.h5").is_file() or not has_pytorch
    body += ["", "## How to use", "", *_usage(repo_id, has_pytorch, has_tf)]
    body += _export_notes(run_dir)
    return f"---\n{front}---\n\n" + "\n".join(body) + "\n"


def _export_notes(run_dir: Path) -> list[str]:
    """What the uploaded ``onnx/`` and ``savedmodel/`` folders hold (complete exports only,
    as ``push`` uploads them)."""
    from qa_finetune.modeling.formats import SERVING
    from qa_finetune.modeling.formats.qa_config import QA_CONFIG

    lines: list[str] = []
    # Folders that `qa-finetune ask` itself answers from are described first.
    for fmt in sorted(SERVING, key=lambda f: f.backend is None):
        folder = run_dir / fmt.name
        if fmt.card_note is not None and (folder / QA_CONFIG).is_file():
            lines += ["", fmt.card_note(folder) + _exported_from(folder / QA_CONFIG)]
    return lines


def _exported_from(qa_config: Path) -> str:
    """`` Exported from the best checkpoint (step N).``: what the folder's qa_config.json
    records (nothing for an export that predates the record)."""
    exported = read_json(qa_config)
    checkpoint, step = exported.get("checkpoint"), exported.get("step")
    if checkpoint not in ("best", "latest"):
        return ""
    at = f" (step {step})" if isinstance(step, int) and not isinstance(step, bool) else ""
    return f" Exported from the {checkpoint} checkpoint{at}."


def confidence_lines(run_dir: Path) -> list[str]:
    """Bullet lines for "Intended use and limitations"."""
    return _rule_warnings(Path(run_dir)) + _calibration_lines(Path(run_dir))


def _rule_warnings(run_dir: Path) -> list[str]:
    """What ``calibrate`` or training warned about the held-out part that chose the rule."""
    try:
        metrics = json.loads(RunPaths(run_dir).metrics.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found = metrics.get("no_answer_rule_warnings") if isinstance(metrics, dict) else None
    return [f"- No-answer rule warning: {w}." for w in found] if isinstance(found, list) else []


def _calibration_lines(run_dir: Path) -> list[str]:
    try:
        calibration = read_calibration(run_dir)
    except CalibrationError:
        calibration = None
    if calibration is None:
        return [
            "- Uncalibrated: answers carry the reader's `score` (its preference among its own "
            "candidates), not the probability that they are right."
        ]
    lines = [
        f"- Each answer carries a `confidence`, the probability that it is right ({CORRECT_MEANS}"
        f"): {calibration.describe()} (`calibration.json`). It holds for questions like "
        "those; calibrate on your own held-out questions (`qa-finetune calibrate`) before "
        "relying on it elsewhere."
    ]
    lines += [f"- Calibration warning: {warning}." for warning in calibration.warnings]
    return lines
