"""Scores by article title (SubjQA's titles are its domains): each title's questions scored
alone with the official scorer, written to ``report_titles.csv`` and shown as a table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qa_finetune.files import write_text_atomic
from qa_finetune.metrics import squad_v1, squad_v2

TITLES_FILE = "report_titles.csv"
_V2_KEYS = ("HasAns_total", "HasAns_exact", "HasAns_f1", "NoAns_total", "NoAns_exact", "NoAns_f1")


def title_scores(
    examples: Sequence[Mapping[str, Any]], answers: Mapping[str, str], allow_no_answer: bool
) -> list[dict[str, Any]]:
    """One row per title (in order of first appearance): count, EM, F1 and, for SQuAD v2,
    HasAns/NoAns; empty when the data has a single title."""
    golds: dict[str, dict[str, list[str]]] = {}
    for example in examples:
        title = str(example.get("title") or "")
        golds.setdefault(title, {})[example["id"]] = list(example["answers"]["text"])
    if len(golds) < 2:
        return []
    rows = []
    for title, gold in golds.items():
        predictions = {key: answers[key] for key in gold if key in answers}
        if allow_no_answer:
            scores = squad_v2(predictions, gold)
            row = {"exact_match": scores["exact"], "f1": scores["f1"]}
            row.update({key: scores[key] for key in _V2_KEYS})
        else:
            scores = squad_v1(predictions, gold)
            row = {"exact_match": scores["exact_match"], "f1": scores["f1"]}
        rows.append({"title": title or "(no title)", "count": len(gold), **row})
    return rows


def write_title_scores(rows: Sequence[Mapping[str, Any]], output_dir: Path) -> str:
    """``report_titles.csv`` and the printable ``by_title`` table ("" without rows)."""
    import pandas as pd

    path = output_dir / TITLES_FILE
    if not rows:
        path.unlink(missing_ok=True)  # a report of earlier data must not stay beside this one
        return ""
    frame = pd.DataFrame.from_records(list(rows))
    write_text_atomic(path, frame.to_csv(index=False, float_format="%.4f"))
    scores = [c for c in frame.columns if c.endswith(("exact", "f1", "exact_match"))]
    table = frame.to_string(index=False, formatters={c: "{:.1f}".format for c in scores})
    return "EM / F1 by_title\n" + table
