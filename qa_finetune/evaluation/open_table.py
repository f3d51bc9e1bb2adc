"""The table ``evaluate --open`` prints: the open evaluation beside the gold-paragraph one."""

from __future__ import annotations

from typing import Any

from qa_finetune.evaluation.open_evaluation import RECALL_AT


def open_table(metrics: dict[str, Any]) -> str:
    """The open evaluation beside the gold-paragraph one, as a small table."""
    rows = [
        (
            "retrieval recall@1 / @5 / @20",
            " / ".join(f"{metrics[f'recall@{k}']:.2f}" for k in RECALL_AT),
        ),
        ("gold paragraph: EM / F1", f"{metrics['exact_match']:.2f} / {metrics['f1']:.2f}"),
        (
            f"open, top {metrics['top_passages']} of {metrics['passages']} passages: EM / F1",
            f"{metrics['open_exact_match']:.2f} / {metrics['open_f1']:.2f}",
        ),
        ("open F1 as % of gold F1", f"{metrics['open_f1_of_gold']}"),
    ]
    if "open_not_sure" in metrics:
        shown = f"{metrics.get('not_sure', 0)} / {metrics['open_not_sure']}"
        rows.append((f"not sure (below {metrics['min_confidence']}): gold / open", shown))
    trust = metrics.get("open_confidence")
    if trust:
        passage = trust["passage_confidence"]
        rows.append(
            (
                f"open confidence ({trust['from']}): ECE / AUROC",
                f"{trust['ece']:.3f} / {_auroc(trust)} (passage alone {passage['ece']:.3f} / "
                f"{_auroc(passage)}, {trust['answered']} answers)",
            )
        )
    if len(metrics.get("retrievers", {})) > 1:
        from qa_finetune.evaluation.open_retrievers import retriever_rows

        rows[0] = (f"{metrics['retriever']}: " + rows[0][0], rows[0][1])
        rows += retriever_rows(metrics)
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def _auroc(figures: dict[str, Any]) -> str:
    # None when every answer was right, or every one wrong: nothing to rank.
    return "-" if figures["auroc"] is None else f"{figures['auroc']:.3f}"
