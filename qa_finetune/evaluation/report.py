"""Where a model fails: per-question scores grouped by question word, answer and context length.

Writes ``report.csv`` (one row per question), ``report_groups.csv`` (EM/F1 per group) and
``f1_by_question_type.png``. pandas and matplotlib (Agg backend) only; no TensorFlow.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qa_finetune.files import write_bytes_durably, write_text_atomic
from qa_finetune.metrics import exact_match_score, f1_score, question_type, squad_v2

QUESTION_TYPES = ("what", "who", "when", "where", "why", "how", "which", "other")
ANSWER_BUCKETS = ("1", "2-3", "4-6", "7+", "none")
WORST_SHOWN = 10


@dataclass(frozen=True)
class Scored:
    """One question as the report needs it."""

    id: str
    question: str
    context: str
    golds: Sequence[str]
    prediction: str | None  # None: no prediction was made for this id


def score_question(
    prediction: str | None, golds: Sequence[str], allow_no_answer: bool
) -> tuple[float, float]:
    """Official EM and F1 (x100) of one question; a missing prediction scores 0."""
    if prediction is None:
        return 0.0, 0.0
    if allow_no_answer:
        scores = squad_v2({"q": prediction}, {"q": list(golds)})
        return scores["exact"], scores["f1"]
    if not golds:
        return 0.0, 0.0
    exact = max(float(exact_match_score(prediction, g)) for g in golds)
    return 100.0 * exact, 100.0 * max(f1_score(prediction, g) for g in golds)


def answer_bucket(golds: Sequence[str]) -> str:
    """Words in the first gold answer: 1, 2-3, 4-6, 7+ ("none" for unanswerable)."""
    if not golds:
        return "none"
    words = len(golds[0].split())
    if words <= 1:
        return "1"
    if words <= 3:
        return "2-3"
    return "4-6" if words <= 6 else "7+"


def context_buckets(words: Sequence[int]) -> tuple[list[str], list[str]]:
    """Quartile buckets of context length in words: (label per context, labels in order)."""
    values = np.asarray(words, dtype=np.int64)
    if not len(values):
        return [], []
    edges = np.unique(np.quantile(values, [0, 0.25, 0.5, 0.75, 1]).round().astype(np.int64))
    if len(edges) == 1:
        label = f"{edges[0]} words"
        return [label] * len(values), [label]
    labels = []
    for k in range(len(edges) - 1):
        low = edges[k] if k == 0 else edges[k] + 1
        high = edges[k + 1]
        labels.append(f"{low}-{high} words" if low < high else f"{high} words")
    # A context of w words goes to the first bucket whose upper edge is >= w.
    index = np.searchsorted(edges[1:-1], values, side="left")
    return [labels[i] for i in index], labels


def per_question(rows: Sequence[Scored], allow_no_answer: bool = False) -> Any:
    """The per-question table (pandas DataFrame)."""
    import pandas as pd

    records = []
    for row in rows:
        em, f1 = score_question(row.prediction, row.golds, allow_no_answer)
        records.append(
            {
                "id": row.id,
                "question": row.question.strip(),
                "question_type": question_type(row.question),
                "gold": " | ".join(row.golds) if row.golds else "(no answer)",
                "prediction": row.prediction,
                "em": em,
                "f1": f1,
                "answer_length": answer_bucket(row.golds),
                "context_words": len(row.context.split()),
            }
        )
    columns = [
        "id",
        "question",
        "question_type",
        "gold",
        "prediction",
        "em",
        "f1",
        "answer_length",
        "context_length",
        "context_words",
    ]
    frame = pd.DataFrame.from_records(
        records, columns=[c for c in columns if c != "context_length"]
    )
    labels, order = context_buckets(frame["context_words"].tolist())
    frame["context_length"] = pd.Categorical(labels, categories=order, ordered=True)
    frame["question_type"] = pd.Categorical(frame["question_type"], QUESTION_TYPES, ordered=True)
    frame["answer_length"] = pd.Categorical(frame["answer_length"], ANSWER_BUCKETS, ordered=True)
    return frame[columns]


def group_scores(frame: Any) -> Any:
    """Mean EM/F1 and counts: overall, then by question word, answer length, context length."""
    import pandas as pd

    parts = [
        pd.DataFrame(
            {
                "group": ["overall"],
                "value": ["all"],
                "count": [len(frame)],
                "exact_match": [frame["em"].mean() if len(frame) else 0.0],
                "f1": [frame["f1"].mean() if len(frame) else 0.0],
            }
        )
    ]
    for column in ("question_type", "answer_length", "context_length"):
        grouped = (
            frame.groupby(column, observed=True)
            .agg(count=("em", "size"), exact_match=("em", "mean"), f1=("f1", "mean"))
            .reset_index()
            .rename(columns={column: "value"})
        )
        grouped["value"] = grouped["value"].astype(str)
        grouped.insert(0, "group", column)
        parts.append(grouped)
    return pd.concat(parts, ignore_index=True)


def worst_examples(frame: Any, count: int = WORST_SHOWN) -> Any:
    """The lowest-F1 questions (then lowest EM, longest context first: the hardest)."""
    ordered = frame.sort_values(["f1", "em", "context_words"], ascending=[True, True, False])
    return ordered.head(count)[["id", "question", "gold", "prediction", "f1"]]


def plot_by_question_type(groups: Any, path: Path) -> None:
    """Bar chart of EM and F1 per question word, with the number of questions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = groups[groups["group"] == "question_type"]
    positions = np.arange(len(rows))
    figure, axis = plt.subplots(figsize=(8, 4))
    axis.bar(positions - 0.2, rows["exact_match"], width=0.4, label="EM")
    axis.bar(positions + 0.2, rows["f1"], width=0.4, label="F1")
    axis.set_xticks(positions)
    axis.set_xticklabels(
        [f"{v}\n(n={n})" for v, n in zip(rows["value"], rows["count"], strict=True)]
    )
    axis.set_ylim(0, 100)
    axis.set_ylabel("score")
    axis.set_title("EM / F1 by question word")
    axis.legend()
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=100)
    plt.close(figure)
    write_bytes_durably(path, image.getvalue())


def _shorten(value: Any, width: int) -> str:
    if not isinstance(value, str):  # None or NaN: no prediction for this id
        return "(missing)"
    text = value.replace("\n", " ") or "(no answer)"
    return text if len(text) <= width else text[: width - 3] + "..."


def format_report(groups: Any, worst: Any) -> str:
    """The grouped scores and the worst examples as aligned text."""
    table = groups.to_string(
        index=False, formatters={"exact_match": "{:.1f}".format, "f1": "{:.1f}".format}
    )
    shown = worst.assign(
        question=worst["question"].map(lambda v: _shorten(v, 50)),
        gold=worst["gold"].map(lambda v: _shorten(v, 30)),
        prediction=worst["prediction"].map(lambda v: _shorten(v, 30)),
    )
    worst_table = shown.to_string(index=False, formatters={"f1": "{:.1f}".format})
    return (
        "EM / F1 by group\n"
        + table
        + f"\n\nWorst {len(worst)} questions (lowest F1)\n"
        + worst_table
    )


def write_report(rows: Sequence[Scored], output_dir: Path, allow_no_answer: bool = False) -> str:
    """Write ``report.csv``, ``report_groups.csv`` and the plot; return the printable text."""
    output_dir.mkdir(parents=True, exist_ok=True)
    frame = per_question(rows, allow_no_answer)
    groups = group_scores(frame)
    # Through write_text_atomic, never pandas' own open: that would write through a link.
    write_text_atomic(output_dir / "report.csv", frame.to_csv(index=False))
    groups_csv = groups.to_csv(index=False, float_format="%.4f")
    write_text_atomic(output_dir / "report_groups.csv", groups_csv)
    plot_by_question_type(groups, output_dir / "f1_by_question_type.png")
    return format_report(groups, worst_examples(frame))


def scored_rows(
    examples: Sequence[Mapping[str, Any]], predictions: Mapping[str, str]
) -> list[Scored]:
    """Join validated examples (id, question, context, answers) with predictions by id."""
    return [
        Scored(
            id=example["id"],
            question=example["question"],
            context=example["context"],
            golds=list(example["answers"]["text"]),
            prediction=predictions.get(example["id"]),
        )
        for example in examples
    ]
