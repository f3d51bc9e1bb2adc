"""Which step a run keeps: the latest, unless an earlier one is clearly better held out."""

from __future__ import annotations

from typing import Any

import pytest

from qa_finetune.training.kept_step import kept_line, margin_for
from qa_finetune.training.progress import RunProgress


def _run(f1s: list[float], questions: int) -> RunProgress:
    progress = RunProgress()
    for step, f1 in enumerate(f1s, start=1):
        progress.record({"step": step, "f1": f1}, None, margin_for(questions))
    return progress


def _kept(f1s: list[float], questions: int) -> tuple[int, str]:
    progress = _run(f1s, questions)
    state = progress.state
    kept = state.best_metrics
    return kept["step"], kept_line(state.history, kept, len(f1s), questions, keep_last=False)


def test_a_flat_curve_on_six_questions_keeps_the_last_step() -> None:
    # Step 1 then a plateau from step 2 on, as a small held-out set gives.
    assert _kept([40.0, 71.43, 71.43, 71.43], 6) == (
        4,
        "kept: step 4, the last, with the best held-out F1 (71.43 on 6 questions)",
    )


def test_a_better_step_by_less_than_one_question_is_not_clearly_better() -> None:
    assert _kept([50.0, 80.0, 70.0], 6) == (
        3,
        "kept: step 3, the last (held-out F1 70.00): step 2's 80.00 is not clearly better, "
        "by less than one of the 6 held-out questions (16.67 F1)",
    )


def test_a_clearly_better_step_is_kept() -> None:
    assert _kept([50.0, 90.0, 60.0], 6) == (
        2,
        "kept: step 2 (held-out F1 90.00), not the last: step 3's 60.00 is more than one of "
        "the 6 held-out questions (16.67 F1) below the best (90.00 at step 2)",
    )


def test_the_latest_step_within_the_margin_of_the_best_is_kept() -> None:
    # 80 at step 2; 70 at step 3 is within 10 (one of 10 questions); 55 at step 4 is not.
    step, line = _kept([50.0, 80.0, 70.0, 55.0], 10)
    assert step == 3
    assert line == (
        "kept: step 3 (held-out F1 70.00), not the last: step 4's 55.00 is more than one of "
        "the 10 held-out questions (10.00 F1) below the best (80.00 at step 2)"
    )


def test_many_questions_keep_the_best_step_as_before() -> None:
    assert _kept([70.0, 75.0, 74.9], 10_570)[0] == 2


def test_patience_counts_evaluations_without_a_better_f1() -> None:
    progress = RunProgress()
    outcomes = [progress.record({"step": s, "f1": 50.0}, 2, 16.7) for s in (1, 2, 3)]
    # Each is kept (a flat curve keeps the latest); the patience of 2 runs out at step 3.
    assert outcomes == [(True, False), (True, False), (True, True)]


@pytest.mark.parametrize(
    ("history", "keep_last", "line"),
    [
        ([{"step": 5, "f1": 30.0}], True, "kept: step 5, the last (train.keep_model=last)"),
        ([], False, "kept: step 5, the last (no held-out questions to choose by)"),
    ],
)
def test_the_line_without_a_choice(
    history: list[dict[str, Any]], keep_last: bool, line: str
) -> None:
    assert kept_line(history, history[-1] if history else {}, 5, 6, keep_last) == line
