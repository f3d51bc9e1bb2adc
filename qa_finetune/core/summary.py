"""Human-readable summaries the commands show (logged; no TensorFlow)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def format_table(rows: Iterable[tuple[str, Any]], title: str | None = None) -> str:
    """Two aligned columns: label and value."""
    rows = [(label, str(value)) for label, value in rows]
    width = max((len(label) for label, _ in rows), default=0)
    lines = [title, "-" * len(title)] if title else []
    lines += [f"  {label.ljust(width)}  {value}" for label, value in rows]
    return "\n".join(lines)


def log_prepare_report(report: dict[str, Any], cache_dir: Path, reused: bool) -> None:
    """Log the prepare summary table (INFO: the CLI shows it on stdout)."""
    train, validation = report["train"], report["validation"]
    tokens = train.get("window_tokens", {})
    rows = [
        ("train source", report["sources"].get("train", "-")),
        ("validation source", report["sources"].get("validation", "-")),
        ("max_length / stride", f"{report['max_length']} / {report['stride']}"),
        ("train examples", train["examples"]),
        ("train features", f"{train['features']} ({train['windows_per_example']} windows/example)"),
        ("answers found", f"{train['answers_found']} of {train['answerable_examples']}"),
        ("answers lost to truncation", train["answers_lost_to_truncation"]),
        (
            "label text matches gold",
            f"{train['label_match_rate']:.2%} of {train['windows_with_answer']} windows",
        ),
        ("repaired / dropped", f"{train['answers_repaired']} / {train['examples_dropped']}"),
        (
            "window tokens p50/p90/p99/max",
            "/".join(str(tokens.get(k, "-")) for k in ("p50", "p90", "p99", "max")),
        ),
        ("validation examples", validation["examples"]),
        ("validation features", validation["features"]),
    ]
    if validation.get("examples_dropped") or validation.get("answers_repaired"):
        rows.append(
            (
                "validation repaired / dropped",
                f"{validation['answers_repaired']} / {validation['examples_dropped']}",
            )
        )
    for split in ("train", "validation"):
        for sample in report[split].get("samples", []):
            rows.append((f"dropped ({split})", sample))
    log.info(format_table(rows, title="Prepared features"))
    state = "reused cache" if reused else "written"
    log.info(f"\nFeatures {state}: {cache_dir}")
