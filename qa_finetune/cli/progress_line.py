"""A progress line on standard error for long loops (embedding passages at ``index`` time):
done of total, rate and time left, redrawn in place on a terminal and every tenth of the
work otherwise, so a log file gets ten lines, not thousands."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressLine:
    """Call with the count just done; prints ``what: done/total (p%), r/s, ETA m:ss``."""

    def __init__(self, what: str, total: int, stream: TextIO | None = None) -> None:
        self.what = what
        self.total = max(total, 1)
        self.done = 0
        self.began = time.perf_counter()
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown_tenth = 0

    def __call__(self, count: int) -> None:
        self.done = min(self.total, self.done + count)
        tenth = 10 * self.done // self.total
        finished = self.done >= self.total
        if not self.live and tenth == self.shown_tenth and not finished:
            return
        self.shown_tenth = tenth
        end = "\n" if finished or not self.live else ""
        print(("\r" if self.live else "") + self.line(), end=end, file=self.stream, flush=True)

    def line(self) -> str:
        """The line as it reads now."""
        elapsed = max(time.perf_counter() - self.began, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        minutes, seconds = divmod(round(left), 60)
        return (
            f"{self.what}: {self.done}/{self.total} ({100 * self.done // self.total}%), "
            f"{rate:.1f}/s, ETA {minutes}:{seconds:02d}"
        )
