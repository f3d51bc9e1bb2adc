"""The one range every seed is checked against: ``train.seed`` and each command's ``--seed``
(NumPy's generator takes seeds in [0, 2**32) and raises its own ValueError outside it)."""

from __future__ import annotations


def seed_problem(seed: int) -> str | None:
    """Why ``seed`` cannot seed NumPy's generator, which takes [0, 2**32), if so: the one check
    of ``train.seed`` and of every ``--seed``."""
    if 0 <= seed < 2**32:
        return None
    shown = str(seed) if abs(seed) < 10**30 else f"an integer of {len(str(abs(seed)))} digits"
    return f"must be in [0, 4294967295], got {shown}"
