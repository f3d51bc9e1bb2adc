"""The summary ``prepare`` prints (no TensorFlow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.tables import format_table


def print_prepare_report(report: dict[str, Any], cache_dir: Path, reused: bool) -> None:
    """Print the prepare summary table."""
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
    print(format_table(rows, title="Prepared features"))
    state = "reused cache" if reused else "written"
    print(f"\nFeatures {state}: {cache_dir}")
