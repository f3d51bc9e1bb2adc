"""The forward cost of a loaded model against batch size and padded length, measured once.

``measure`` times passes of made-up windows (a warm-up pass, then the best of a few, or one
for a long pass) at two padded lengths for batch sizes 1, 2, 4, ... and stops once a window
costs clearly more than at the best size so far (a CPU past its sweet spot) or the time cap
would be passed. Then it times every shape again, a few rounds in alternating order, keeping
each shape's fastest pass: on a machine shared with other work a burst of load slows the
passes that run during it, and the fastest of passes spread over the whole measurement is
what the model costs when it has the cores. The profile is cached per model architecture,
backend, machine and library version (``modeling/profile_cache``), so a later ``serve``,
``evaluate`` or ``ask --batch`` reads it instead (``modeling/live_check`` drops it when the
real passes run much faster than it says). ``QA_FINETUNE_BATCH_PROFILE=off`` turns measuring
off (tests, exact reruns): the configured batch sizes are used as they are.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from qa_finetune.modeling.batch_policy import CostProfile, batch_line, choose_batch
from qa_finetune.modeling.live_check import LiveCheck, forget_cached

log = logging.getLogger(__name__)

PROFILE_ENV = "QA_FINETUNE_BATCH_PROFILE"
SIZES = (1, 2, 4, 8, 16, 32, 64)
SHORT_LENGTH = 128  # besides the model's own window length: short windows batch differently
REPEATS = 3
# A pass this long is timed once after its warm-up: its spread is small beside its length, and
# the time saved measures the next batch size (on a 2-core CPU, 8 windows of 384 tokens take
# about 1.5 s a pass; with three timed passes the cap stopped the measurement at 4 windows).
LONG_PASS = 0.5
# Seconds for the whole measurement, warm-up passes included: on a 2-core CPU three lengths
# reach 8 windows a pass within it. Measured once per model and machine, then cached.
TIME_CAP = 20.0
# Growing the batch stops once a window costs this much more than at the best size so far.
RISING = 1.25
# After the sizes are grown, every shape is timed this many more times, in alternating order
# (largest first, then smallest first...), within EXTRA_CAP more seconds.
EXTRA_ROUNDS = 2
EXTRA_CAP = 10.0

# (windows in the pass, padded length) -> runs one forward pass
RunPass = Callable[[int, int], Any]


def enabled() -> bool:
    """False when ``QA_FINETUNE_BATCH_PROFILE`` is off, 0, false or no."""
    return os.environ.get(PROFILE_ENV, "on").strip().lower() not in ("off", "0", "false", "no")


def profile_lengths(max_length: int) -> tuple[int, ...]:
    """The padded lengths measured: a short window, the model's full window and one halfway
    (most real windows lie between the two ends, and a pass's cost is not a straight line in
    its length: 8 windows cost about what 4 do up to 256 tokens and 40% more at 384 on a
    2-core CPU, bench/reports/09-serve.md)."""
    short = min(SHORT_LENGTH, max_length)
    return tuple(sorted({short, (short + max_length) // 2, max_length}))


def _timed_passes(seconds: float, repeats: int) -> int:
    """How many passes of a shape are timed, given about how long one takes."""
    return 1 if seconds >= LONG_PASS else repeats


def _time_pass(run_pass: RunPass, batch: int, length: int, repeats: int, clock: Any) -> float:
    """The fewest seconds of ``repeats`` passes (one for a long pass), after one warm-up pass
    of the same shape: other work on the machine only ever makes a pass slower."""
    began = clock()
    run_pass(batch, length)
    times: list[float] = []
    for _ in range(_timed_passes(clock() - began, repeats)):
        began = clock()
        run_pass(batch, length)
        times.append(clock() - began)
    return min(times)


def measure(
    run_pass: RunPass,
    backend: str,
    lengths: Sequence[int],
    sizes: Sequence[int] = SIZES,
    repeats: int = REPEATS,
    time_cap: float = TIME_CAP,
    clock: Callable[[], float] = time.perf_counter,
    extra_rounds: int = EXTRA_ROUNDS,
    extra_cap: float = EXTRA_CAP,
) -> CostProfile:
    """Seconds per pass for growing batch sizes at each of ``lengths``, each shape's fastest
    over ``1 + extra_rounds`` rounds (see the module)."""
    seconds: dict[int, dict[int, float]] = {length: {} for length in lengths}
    run_pass(sizes[0], lengths[0])  # outside the time cap: a Keras model traces its graph here
    began = clock()
    best = float("inf")
    for size in sizes:
        for length in lengths:
            seconds[length][size] = _time_pass(run_pass, size, length, repeats, clock)
        per_window = sum(by_batch[size] / size for by_batch in seconds.values())
        best = min(best, per_window)
        if per_window > best * RISING:
            break
        # The next size's passes take about twice as long as this size's.
        upcoming = sum(
            2 * by_batch[size] * (1 + _timed_passes(2 * by_batch[size], repeats))
            for by_batch in seconds.values()
        )
        if clock() - began + upcoming > time_cap:
            break
    _time_again(run_pass, seconds, extra_rounds, extra_cap, clock)
    return CostProfile(backend, seconds)


def _time_again(
    run_pass: RunPass,
    seconds: dict[int, dict[int, float]],
    rounds: int,
    cap: float,
    clock: Callable[[], float],
) -> None:
    """Time every measured shape ``rounds`` more times, once each per round, keeping its
    fastest: round 1 from the largest batch down, round 2 from the smallest up, ..., so a slow
    spell of the machine falls on different sizes each round. Stops before a pass would take
    the rounds past ``cap`` seconds."""
    shapes = [
        (size, length)
        for size in sorted(set.intersection(*(set(by) for by in seconds.values())))
        for length in seconds
    ]
    began = clock()
    for round_number in range(rounds):
        for size, length in shapes[::-1] if round_number % 2 == 0 else shapes:
            if clock() - began + seconds[length][size] > cap:
                return
            start = clock()
            run_pass(size, length)
            seconds[length][size] = min(seconds[length][size], clock() - start)


def model_pass(model: Any, tokenizer: Any, input_names: Sequence[str]) -> RunPass:
    """One forward pass of ``model`` (Keras, compiled, or a predictor) over made-up windows."""
    from qa_finetune.modeling.predict import predict_features

    token = min(1000, int(getattr(tokenizer, "vocab_size", 1000)) - 1)
    pad = tokenizer.pad_token_id or 0

    def run_pass(batch: int, length: int) -> Any:
        # The cost does not depend on which tokens are in the window, only on how many.
        rows = [[token] * length for _ in range(batch)]
        encoding = {"input_ids": rows, "attention_mask": [[1] * length] * batch}
        if "token_type_ids" in input_names:
            encoding["token_type_ids"] = [[0] * length] * batch
        return predict_features(model, encoding, batch, pad_token_id=pad, compile=True)

    return run_pass


def _model_file(model: Any) -> str:
    """The file a predictor runs (name and size: fp32 and int8 cost differently), or ""."""
    path = getattr(model, "path", None)
    if isinstance(path, Path) and path.is_file():
        return f"{path.name}:{path.stat().st_size}"
    return ""


def _key(model: Any, model_dir: Path, backend: str, max_length: int) -> dict[str, object]:
    from qa_finetune.modeling import profile_cache

    lengths = profile_lengths(max_length)
    return profile_cache.profile_key(model_dir, backend, lengths, _model_file(model))


def live_check(
    model: Any, model_dir: Path, backend: str, max_length: int, profile: CostProfile
) -> LiveCheck:
    """A check of ``profile`` against the real passes that drops its cached copy when they
    run much faster (``modeling/live_check``)."""
    return LiveCheck(profile, forget_cached(_key(model, model_dir, backend, max_length)))


def model_profile(
    model: Any, tokenizer: Any, model_dir: Path, backend: str, max_length: int
) -> CostProfile:
    """The cached profile of this model, backend and machine, measured when there is none."""
    from qa_finetune.modeling import profile_cache

    key = _key(model, model_dir, backend, max_length)
    lengths = profile_lengths(max_length)
    with profile_cache.locked(key):
        profile = profile_cache.read(key)
        if profile is not None:
            return profile
        names = tuple(getattr(tokenizer, "model_input_names", ("input_ids", "attention_mask")))
        began = time.perf_counter()
        profile = measure(model_pass(model, tokenizer, names), backend, lengths)
        log.info(
            "measured the %s forward pass in %.1f s (%s=off skips this): windows per second "
            "by batch size %s",
            backend,
            time.perf_counter() - began,
            PROFILE_ENV,
            ", ".join(f"{b}: {profile.windows_per_second(b):.1f}" for b in profile.batches()),
        )
        profile_cache.write(key, profile)
    return profile


def tuned_batch_size(
    model: Any,
    tokenizer: Any,
    model_dir: Path,
    backend: str,
    max_length: int,
    fallback: int,
    most: int | None = None,
) -> tuple[int, CostProfile | None]:
    """The batch size with the most windows per second on this machine and the profile it
    was chosen from, or ``(fallback, None)`` when measuring is turned off."""
    if not enabled():
        return fallback, None
    profile = model_profile(model, tokenizer, model_dir, backend, max_length)
    chosen = choose_batch(profile, most)
    log.info(
        "%s; a batch size you set (--batch-size, --max-batch) is used instead",
        batch_line(profile, chosen, most),
    )
    return chosen, profile
