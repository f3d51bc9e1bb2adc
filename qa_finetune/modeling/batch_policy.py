"""How many windows to put in one forward pass, decided from measured costs alone.

A ``CostProfile`` holds the seconds of one forward pass for a few padded lengths and batch
sizes on one machine and backend (``modeling/batch_profile`` measures and caches it). The
choice is a pure function of it, so it can be tested on made-up profiles: on a CPU the cost
per window often rises with the batch (the caches overflow and the threads already fill the
cores), and batch 1 or a small batch wins; on a GPU a pass costs about the same for 1 or 64
windows, and the largest batch wins. No NumPy, no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# A batch within this fraction of the cheapest cost per window counts as just as fast: on a
# shared 2-core CPU the median of the same pass differed by 10-20% from one round to the next
# (bench/reports/09-serve.md). The largest such batch is chosen: the profile times the model
# alone, and a bigger pass also spreads the work around the model (padding, hand-offs, the
# decoding dispatch) over more windows. It costs no waiting: a server's passes are only as
# big as its load makes them, and a lone request goes alone.
TOLERANCE = 0.10


@dataclass(frozen=True)
class CostProfile:
    """Measured forward passes: ``seconds[length][batch]``, the median time of one pass of
    ``batch`` windows padded to ``length`` tokens."""

    backend: str
    seconds: Mapping[int, Mapping[int, float]]

    def batches(self) -> list[int]:
        """The batch sizes measured at every length, smallest first."""
        sizes = [set(by_batch) for by_batch in self.seconds.values()]
        return sorted(set.intersection(*sizes)) if sizes else []

    def cost_per_window(self, batch: int) -> float:
        """Seconds per window at ``batch``, summed over the measured lengths (each length
        weighs the same: windows of every length reach the model)."""
        return sum(by_batch[batch] / batch for by_batch in self.seconds.values())

    def windows_per_second(self, batch: int) -> float:
        """Windows per second at ``batch``, averaged over the measured lengths."""
        return len(self.seconds) / self.cost_per_window(batch)

    def estimate(self, batch: int, length: int) -> float:
        """Seconds of one pass of ``batch`` windows padded to ``length`` tokens: measured
        values where there are some, straight lines between (and past) them otherwise."""
        lengths = sorted(self.seconds)
        if len(lengths) == 1:
            return _at_batch(self.seconds[lengths[0]], batch) * length / lengths[0]
        # The measured segment around ``length``, or the nearest one to extend.
        upper = next((i for i, known in enumerate(lengths) if known >= length), len(lengths) - 1)
        low, high = lengths[max(upper, 1) - 1], lengths[max(upper, 1)]
        cost_low = _at_batch(self.seconds[low], batch)
        cost_high = _at_batch(self.seconds[high], batch)
        line = cost_low + (cost_high - cost_low) * (length - low) / (high - low)
        # Never below what the shortest measured length costs per token.
        return max(line, cost_low * length / low if length < low else 0.0)

    def to_dict(self) -> dict[str, Any]:
        """As JSON holds it (object keys are strings)."""
        return {
            "backend": self.backend,
            "seconds": {
                str(length): {str(batch): value for batch, value in by_batch.items()}
                for length, by_batch in self.seconds.items()
            },
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> CostProfile:
        """Read back ``to_dict``; a malformed profile raises ``ValueError``."""
        try:
            seconds = {
                int(length): {int(batch): float(value) for batch, value in by_batch.items()}
                for length, by_batch in values["seconds"].items()
            }
            profile = cls(str(values["backend"]), seconds)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"not a cost profile: {exc}") from None
        if not profile.batches() or any(
            not value > 0 for by_batch in seconds.values() for value in by_batch.values()
        ):
            raise ValueError("not a cost profile: no positive timings shared by every length")
        return profile


def _at_batch(by_batch: Mapping[int, float], batch: int) -> float:
    """Seconds of a pass of ``batch`` windows at one length: between measured sizes on the
    line joining them; past the largest, its cost per window times ``batch``."""
    if batch in by_batch:
        return by_batch[batch]
    sizes = sorted(by_batch)
    if batch < sizes[0]:
        return by_batch[sizes[0]] * batch / sizes[0]
    if batch > sizes[-1]:
        return by_batch[sizes[-1]] * batch / sizes[-1]
    high = next(size for size in sizes if size > batch)
    low = max(size for size in sizes if size < batch)
    return by_batch[low] + (by_batch[high] - by_batch[low]) * (batch - low) / (high - low)


def choose_batch(profile: CostProfile, most: int | None = None) -> int:
    """The batch size that gives the most windows per second (1 where nothing beats one
    window a pass); the largest batch within ``TOLERANCE`` of the best, at most ``most``."""
    sizes = [b for b in profile.batches() if most is None or b <= most]
    if not sizes:
        return 1
    best = min(profile.cost_per_window(b) for b in sizes)
    return max(b for b in sizes if profile.cost_per_window(b) <= best * (1 + TOLERANCE))


def batch_line(profile: CostProfile, chosen: int, most: int | None = None) -> str:
    """What ``choose_batch`` chose and why, in numbers that agree with each other."""
    sizes = [b for b in profile.batches() if most is None or b <= most]
    windows = "window" if chosen == 1 else "windows"
    speed = profile.windows_per_second(chosen) if chosen in sizes else float("nan")
    fastest = max(sizes, key=profile.windows_per_second) if sizes else chosen
    if fastest == chosen:
        alone = (
            f"; {profile.windows_per_second(1):.1f} one at a time"
            if chosen != 1 and 1 in sizes
            else ""
        )
        why = f"the fastest measured on this machine ({speed:.1f} windows a second{alone})"
    else:
        why = (
            f"the largest batch within {TOLERANCE:.0%} of the fastest measured on this machine "
            f"({speed:.1f} windows a second; {profile.windows_per_second(fastest):.1f} at "
            f"{fastest} a time)"
        )
    return f"answering {chosen} {windows} at a time, {why}"


def batch_for_length(profile: CostProfile, length: int) -> int:
    """The pass size for windows padded to ``length`` tokens: as ``choose_batch``, from the
    cost per window at that length alone. On a CPU short windows batch well and long ones
    do not, so one size for all lengths is too small for the one or too big for the other."""
    sizes = profile.batches()
    if not sizes:
        return 1
    per_window = {b: profile.estimate(b, length) / b for b in sizes}
    best = min(per_window.values())
    return max(b for b in sizes if per_window[b] <= best * (1 + TOLERANCE))


def serving_batch(profile: CostProfile) -> int:
    """A server's largest pass: the pass size of the measured length that batches best."""
    return max(batch_for_length(profile, length) for length in profile.seconds)


def choose_backend(profiles: Mapping[str, CostProfile]) -> str:
    """The backend with the most windows per second at its own best batch size."""
    if not profiles:
        raise ValueError("no profiles to choose a backend from")

    def speed(name: str) -> float:
        profile = profiles[name]
        return profile.windows_per_second(choose_batch(profile))

    return max(sorted(profiles), key=speed)
