"""The cached cost profile checked against the passes that really run.

A profile measured while other work ran on the machine says a pass costs more than it does;
the batch size chosen from it then stays until something measures again. ``LiveCheck`` is
handed the seconds of each real forward pass; once enough have run, it compares their
median with what the profile says passes of those shapes cost. When the real passes run
``DISAGREES`` times faster or more, the profile was measured on a busy machine: the cached
copy is dropped, so the next command that needs it measures again. Passes much *slower*
than the profile are the machine being busy now: measuring then would keep that, so they
change nothing. No TensorFlow.
"""

from __future__ import annotations

import logging
import statistics
import threading
from collections.abc import Callable

from qa_finetune.modeling.batch_policy import CostProfile

log = logging.getLogger(__name__)

# The first passes trace and warm up the model: they say nothing about its steady cost.
WARM_UP_PASSES = 3
# Real passes compared, after the warm-up, before the profile is judged (once).
COMPARED_PASSES = 8
# Real passes this many times faster than the profile: it was measured on a busy machine.
DISAGREES = 2.0


class LiveCheck:
    """Compares real passes with ``profile``; calls ``on_disagree(ratio)`` once when they run
    ``DISAGREES`` times faster or more (ratio: real seconds over the profile's)."""

    def __init__(
        self,
        profile: CostProfile,
        on_disagree: Callable[[float], None],
        warm_up: int = WARM_UP_PASSES,
        compared: int = COMPARED_PASSES,
    ) -> None:
        self.profile = profile
        self.on_disagree = on_disagree
        self.warm_up = warm_up
        self.compared = compared
        self.seen = 0
        self.ratios: list[float] = []
        self.verdict: float | None = None  # the median ratio, once judged
        # Passes at once (``predict_features``' threads) report at once: judged once.
        self._lock = threading.Lock()

    def __call__(self, batch: int, length: int, seconds: float) -> None:
        """One real pass of ``batch`` windows padded to ``length`` tokens took ``seconds``."""
        with self._lock:
            self._observe(batch, length, seconds)

    def _observe(self, batch: int, length: int, seconds: float) -> None:
        self.seen += 1
        if self.verdict is not None or self.seen <= self.warm_up:
            return
        expected = self.profile.estimate(batch, length)
        if expected > 0 and seconds > 0:
            self.ratios.append(seconds / expected)
        if len(self.ratios) < self.compared:
            return
        self.verdict = statistics.median(self.ratios)
        if self.verdict <= 1 / DISAGREES:
            self.on_disagree(self.verdict)


def forget_cached(key: dict[str, object]) -> Callable[[float], None]:
    """What a disagreement does to the profile cached under ``key``: drop it, and say so."""
    from qa_finetune.modeling import profile_cache

    def on_disagree(ratio: float) -> None:
        profile_cache.forget(key)
        log.info(
            "the model runs %.1f times faster than when its batch size was measured (the "
            "machine was busier then): it is measured again the next time",
            1 / ratio,
        )

    return on_disagree
