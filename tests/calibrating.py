"""Test help for calibrated runs of tiny random models."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def keeping_any_calibration() -> Iterator[None]:
    """A tiny random model's confidence learns nothing, so ``calibrate`` refuses it (its own
    tests check that); fixtures that test what a calibrated run saves and carries keep it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "qa_finetune.calibration.confidence._refuse_if_nothing_learned", lambda *_: None
        )
        yield
