"""Which validated step's weights a run keeps, and the line that says so.

A run keeps its latest weights unless an earlier step scored *clearly* better on the held-out
questions: by more than one question's worth of F1 (100 / the number of questions). On six
held-out questions one answer moves F1 by 16.7 points, so a flat or noisy curve is no
evidence and the later, longer-trained weights stay; on ten thousand questions the margin is
0.01 and the best step is kept, as before. The weights kept are the latest validated step
within that margin of the best F1 (``within_margin``), decided as each validation comes in.
No TensorFlow: the tests drive it with made-up histories.
"""

from __future__ import annotations

from typing import Any


def margin_for(questions: int) -> float:
    """F1 points one of ``questions`` held-out questions is worth (0 with none)."""
    return 100.0 / questions if questions > 0 else 0.0


def within_margin(f1: float | None, best_f1: float | None, margin: float) -> bool:
    """Whether weights scoring ``f1`` are kept over earlier ones: no earlier step scored
    more than ``margin`` better (``best_f1``: the best F1 so far, this one included)."""
    return f1 is None or best_f1 is None or f1 >= best_f1 - margin


def kept_line(
    history: list[dict[str, Any]],
    kept: dict[str, Any],
    final_step: int,
    questions: int,
    keep_last: bool,
) -> str:
    """One sentence: the step whose weights are in model/, and why."""
    scored = [row for row in history if row.get("f1") is not None]
    if keep_last:
        return f"kept: step {final_step}, the last (train.keep_model=last)"
    if not scored:
        return f"kept: step {final_step}, the last (no held-out questions to choose by)"
    best = max(scored, key=lambda row: row["f1"])
    last = scored[-1]
    margin = margin_for(questions)
    what = f"one of the {questions:,} held-out questions ({margin:.2f} F1)"
    if kept.get("step") == last["step"]:
        if best is last or best["f1"] == last["f1"]:
            return (
                f"kept: step {last['step']}, the last, with the best held-out F1 "
                f"({last['f1']:.2f} on {questions:,} questions)"
            )
        return (
            f"kept: step {last['step']}, the last (held-out F1 {last['f1']:.2f}): step "
            f"{best['step']}'s {best['f1']:.2f} is not clearly better, by less than {what}"
        )
    return (
        f"kept: step {kept.get('step')} (held-out F1 {kept.get('f1', 0.0):.2f}), not the last: "
        f"step {last['step']}'s {last['f1']:.2f} is more than {what} below the best "
        f"({best['f1']:.2f} at step {best['step']})"
    )
