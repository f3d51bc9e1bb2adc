"""The files of a predictions folder, read for ``evaluate --predictions``: the official
predictions, and beside them the null odds and n-best lists that ``evaluate`` writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_finetune.calibration.metrics import answerability
from qa_finetune.decoding.spans import Predictions
from qa_finetune.errors import QAFinetuneError
from qa_finetune.files import read_text, surrogate_problem
from qa_finetune.files.nesting import load_json


class EvaluationError(QAFinetuneError):
    """The evaluation data or predictions cannot be scored as given."""


def json_object(path: Path, text: str, shape: str, fix: str = "") -> dict[str, Any]:
    """``text`` (read from ``path``) as one JSON object, or an error naming the file."""
    values = load_json(
        text,
        str(path),
        lambda exc: f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}){fix}",
        EvaluationError,
        keys_once=True,
    )
    if not isinstance(values, dict):
        raise EvaluationError(f"{path} must hold one JSON object {shape}")
    return values


def read_predictions(path: Path) -> dict[str, str]:
    """An official predictions file: one JSON object ``{question id: answer text}``."""
    text = read_text(path, "predictions file", "--predictions", EvaluationError)
    values = json_object(path, text, "{question id: answer} (official SQuAD format)")
    for key, value in values.items():
        if not isinstance(value, str):
            raise EvaluationError(
                f"{path}: the answer for id {key!r} is {type(value).__name__}, not text "
                "(official SQuAD format {id: answer})"
            )
        for what, text in ((f"the id {key!r}", key), (f"the answer for id {key!r}", value)):
            # JSON's "\ud800" escape: half a character, which no report can be written with.
            problem = surrogate_problem(text)
            if problem:
                raise EvaluationError(f"{path}: {what} {problem}: fix the file")
    return values


def read_null_odds(predictions_path: Path) -> dict[str, float] | None:
    """The ``null_odds.json`` beside the predictions (numbers only), or None without one."""
    odds_path = predictions_path.with_name("null_odds.json")
    if not odds_path.is_file():
        return None
    text = read_text(odds_path, "null odds file", error=EvaluationError)
    odds = json_object(odds_path, text, "{id: number}", fix=": fix or remove it")
    return {k: float(v) for k, v in odds.items() if isinstance(v, (int, float))}


def answerability_of_files(
    predictions_path: Path,
    answers: dict[str, str],
    null_diff: dict[str, float],
    gold: dict[str, list[str]],
) -> dict[str, float]:
    """The no-answer AUC from the null odds; HasAns F1 answering all only when the n-best
    lists lie beside the predictions (an abstention's span is not in predictions.json)."""
    nbest_path = predictions_path.with_name("nbest_predictions.json")
    if not nbest_path.is_file():
        return answerability(Predictions(answers, no_answer_score=null_diff), gold, spans=False)
    text = read_text(nbest_path, "n-best file", error=EvaluationError)
    lists = json_object(nbest_path, text, "{id: [answers]}", fix=": fix or remove it")
    # Entries as `evaluate` writes them ({"text": ...}); anything else is not a span.
    nbest = {
        qid: [e for e in entries if isinstance(e, dict) and isinstance(e.get("text"), str)]
        for qid, entries in lists.items()
        if isinstance(entries, list)
    }
    return answerability(Predictions(answers, nbest, no_answer_score=null_diff), gold)
