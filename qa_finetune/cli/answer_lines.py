"""How ``ask`` shows one answer on a line: the text, then how sure the reader is of it.

A calibrated run shows its confidence as a percentage ("confidence 34%"), the chance the
answer is right, noting when the answer lay outside the range its calibration was fitted on
(the number is then extrapolated); an uncalibrated one shows the reader's ``score`` and says
it is not one. "No answer" has no characters to show, so no span is printed for it.
"""

from __future__ import annotations

from typing import Any

from qa_finetune.cli.terminal import one_line, visible


def percent(probability: float) -> str:
    """A probability as a whole percentage, never a false 0% or 100%."""
    shown = round(100 * probability)
    if shown <= 0 and probability > 0:
        return "<1%"
    if shown >= 100 and probability < 1:
        return ">99%"
    return f"{shown}%"


def answer_line(item: dict[str, Any]) -> str:
    """One answer as ``ask`` prints it (answers are the user's text: escapes are shown)."""
    if item.get("not_sure"):
        guess = item["best_candidate"]
        what = f'"{visible(one_line(guess["answer"]))}"' if guess["answer"] else "no answer"
        return (
            f"(not sure: confidence {percent(item['confidence'])}{_extrapolated(item)}, below "
            "the minimum; best "
            f"candidate {what}{_span(guess)})"
        )
    shown = visible(one_line(item["answer"])) if item["answer"] else "(no answer)"
    if "confidence" in item:
        sure = f"confidence {percent(item['confidence'])}{_extrapolated(item)}"
    else:
        sure = f"score {item['score']:.3f}, uncalibrated"
    return f"{shown}  ({sure}{_span(item)})"


def _extrapolated(item: dict[str, Any]) -> str:
    """A short note when the confidence was extrapolated past its calibration's range."""
    if item.get("calibration_range") == "outside":
        return " (extrapolated: outside the calibration's range)"
    return ""


def _span(item: dict[str, Any]) -> str:
    return f", chars {item['start']}-{item['end']}" if item["answer"] else ""
