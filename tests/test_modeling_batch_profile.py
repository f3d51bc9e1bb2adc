"""The forward cost measured (warm-up, best of several, early stop, time cap, rounds timed
again in alternating order), cached per machine in XDG_CACHE_HOME, and the batch size it
chooses for ask, evaluate and serve; a flag wins; real passes much faster than the profile
drop it from the cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from qa_finetune.modeling import batch_profile, profile_cache
from qa_finetune.modeling.batch_policy import CostProfile


class FakeModel:
    """A forward pass that costs ``cost(batch, length)`` seconds on a fake clock."""

    def __init__(self, cost) -> None:
        self.cost = cost
        self.now = 0.0
        self.passes: list[tuple[int, int]] = []

    def clock(self) -> float:
        return self.now

    def run_pass(self, batch: int, length: int) -> None:
        self.passes.append((batch, length))
        self.now += self.cost(batch, length)


def test_a_cpu_like_cost_stops_growing_the_batch_once_a_window_costs_more() -> None:
    model = FakeModel(lambda b, n: b * n * 1e-4 * (1 + 0.1 * (b - 1)))
    profile = batch_profile.measure(model.run_pass, "tf", (128, 384), clock=model.clock)
    # Per window at 4 is 1.3x that at 1, past RISING (1.25): 8 is never tried.
    assert profile.batches() == [1, 2, 4]
    assert profile.seconds[384][2] == pytest.approx(2 * 384e-4 * 1.1)
    # One untimed pass first, then per shape one warm-up and three timed passes, then two
    # more rounds of one pass per shape.
    assert model.passes[0] == (1, 128)
    assert len(model.passes) == 1 + 3 * 2 * 4 + 2 * 3 * 2


def test_a_gpu_like_cost_is_measured_up_to_the_largest_batch() -> None:
    model = FakeModel(lambda b, n: 0.01)
    profile = batch_profile.measure(model.run_pass, "tf", (128, 384), clock=model.clock)
    assert profile.batches() == list(batch_profile.SIZES)
    assert batch_profile.choose_batch(profile) == 64


@pytest.mark.parametrize(("cap", "sizes"), [(2.0, [1]), (8.0, [1, 2, 4]), (10.0, [1, 2, 4, 8])])
def test_the_time_cap_stops_before_a_size_that_would_pass_it(cap: float, sizes: list) -> None:
    # 0.1 s a window whatever the batch: size s costs 2 lengths x 4 passes x 0.1 s x s up to 4
    # (0.8, 1.6, 3.2 s: 5.6 s in all), and 8 (a pass of 0.8 s, timed once) 2 x 2 x 0.8 s.
    model = FakeModel(lambda b, n: 0.1 * b)
    profile = batch_profile.measure(
        model.run_pass, "tf", (128, 384), time_cap=cap, clock=model.clock, extra_rounds=0
    )
    assert profile.batches() == sizes
    assert model.now - 0.1 <= cap  # the untimed first pass aside


def test_a_long_pass_is_timed_once_after_its_warm_up() -> None:
    # A 2-core CPU's costs (about 0.05 s a window at 128 tokens, 0.18 s at 384, whatever the
    # batch): three timed passes of every shape would stop at 4 windows under a 12 s cap.
    model = FakeModel(lambda b, n: b * n * 4.7e-4)
    profile = batch_profile.measure(
        model.run_pass, "tf", (128, 384), time_cap=12.0, clock=model.clock, extra_rounds=0
    )
    assert profile.batches() == [1, 2, 4, 8]
    shapes = model.passes[1:]
    # Under LONG_PASS: a warm-up and three timed passes; over it: a warm-up and one.
    assert shapes.count((2, 384)) == 4  # 0.36 s
    assert shapes.count((4, 384)) == 2  # 0.72 s
    assert shapes.count((8, 384)) == 2
    assert shapes.count((8, 128)) == 4  # 0.48 s
    assert profile.seconds[384][8] == pytest.approx(8 * 384 * 4.7e-4)
    assert model.now - model.cost(1, 128) <= 12.0


def test_profile_lengths_are_a_short_window_the_full_one_and_one_halfway() -> None:
    assert batch_profile.profile_lengths(384) == (128, 256, 384)
    assert batch_profile.profile_lengths(200) == (128, 164, 200)
    assert batch_profile.profile_lengths(96) == (96,)


def test_the_three_lengths_reach_eight_windows_within_the_cap() -> None:
    # The 2-core CPU's costs again, at the lengths a 384-token model is measured at.
    model = FakeModel(lambda b, n: b * n * 4.7e-4)
    lengths = batch_profile.profile_lengths(384)
    profile = batch_profile.measure(model.run_pass, "tf", lengths, clock=model.clock)
    assert profile.batches() == [1, 2, 4, 8]
    assert sorted(profile.seconds) == [128, 256, 384]
    # The sizes grown within the cap, the rounds timed again within theirs.
    cap = batch_profile.TIME_CAP + batch_profile.EXTRA_CAP
    assert model.now - model.cost(1, 128) <= cap


class BusyModel(FakeModel):
    """Passes cost ``cost(batch, length)`` seconds, times ``slowdown`` while the machine is
    busy: from the ``busy_from``-th pass for ``busy_for`` passes."""

    def __init__(self, cost, busy_from: int, busy_for: int, slowdown: float) -> None:
        super().__init__(cost)
        self.busy = range(busy_from, busy_from + busy_for)
        self.slowdown = slowdown

    def run_pass(self, batch: int, length: int) -> None:
        factor = self.slowdown if len(self.passes) in self.busy else 1.0
        self.passes.append((batch, length))
        self.now += self.cost(batch, length) * factor


def test_a_burst_of_load_while_growing_the_batch_is_timed_away_in_later_rounds() -> None:
    # A CPU where 2 windows a pass are cheapest per window; the machine is 6x slower while
    # size 2 is first timed (passes 9 to 16, after the untimed pass and size 1's eight), as
    # when other work starts: growing the batch stops there.
    def cost(batch: int, length: int) -> float:
        return {1: 0.010, 2: 0.016, 4: 0.036}[batch] * length / 128

    def measured(extra_rounds: int) -> tuple[BusyModel, CostProfile]:
        model = BusyModel(cost, busy_from=9, busy_for=8, slowdown=6.0)
        profile = batch_profile.measure(
            model.run_pass, "tf", (128, 256), clock=model.clock, extra_rounds=extra_rounds
        )
        return model, profile

    _, once = measured(0)
    model, rounds = measured(batch_profile.EXTRA_ROUNDS)
    # Timed once, 2 windows looked 6x dearer than they are and 1 window won.
    assert once.batches() == [1, 2]
    assert once.seconds[128][2] == pytest.approx(6 * 0.016)
    assert batch_profile.choose_batch(once) == 1
    # Every shape timed again after the burst: each keeps its fastest pass, the true cost.
    assert rounds.seconds[128][2] == pytest.approx(0.016)
    assert rounds.seconds[256][2] == pytest.approx(0.032)
    assert batch_profile.choose_batch(rounds) == 2
    # Two extra rounds of the four shapes: largest batch first, then smallest first.
    extra = [batch for batch, _ in model.passes[-8:]]
    assert extra == [2, 2, 1, 1, 1, 1, 2, 2]


def test_the_extra_rounds_stop_at_their_cap() -> None:
    model = FakeModel(lambda b, n: 0.5)  # every pass half a second
    batch_profile.measure(
        model.run_pass, "tf", (128,), sizes=(1, 2), clock=model.clock, extra_cap=1.2
    )
    # Sizes 1 and 2: an untimed pass, a warm-up and one timed pass each (long passes), then
    # two passes of the extra rounds fit in 1.2 s and a third would not.
    assert len(model.passes) == 1 + 2 * 2 + 2


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(batch_profile.PROFILE_ENV, "on")
    return tmp_path / "xdg" / "qa-finetune" / "batch-profiles"


def profiles_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("tf-*.json")) if folder.is_dir() else []


def test_a_measured_batch_size_is_cached_and_the_cache_is_read_back(
    tiny_model_dir: Path, cache: Path
) -> None:
    from qa_finetune.modeling.for_answering import load_for_answering

    loaded = load_for_answering(str(tiny_model_dir), max_length=96, tune_batch=True)
    [path] = profiles_in(cache)
    stored = json.loads(path.read_text(encoding="utf-8"))
    profile = CostProfile.from_dict(stored["profile"])
    assert sorted(profile.seconds) == [96]
    assert stored["key"]["backend"] == "tf" and stored["key"]["lengths"] == [96]
    assert loaded.settings.batch_size == batch_profile.choose_batch(profile)
    # A GPU-like profile put in its place is what the next load chooses from.
    flat = CostProfile("tf", {96: {b: 0.01 for b in (1, 2, 4, 8)}})
    path.write_text(json.dumps({**stored, "profile": flat.to_dict()}), encoding="utf-8")
    again = load_for_answering(str(tiny_model_dir), max_length=96, tune_batch=True)
    assert again.settings.batch_size == 8
    assert again.profile == flat  # kept for the server's length grouping
    assert profiles_in(cache) == [path]


def test_a_damaged_cache_file_is_measured_again(tiny_model_dir: Path, cache: Path) -> None:
    from qa_finetune.modeling.for_answering import load_for_answering

    load_for_answering(str(tiny_model_dir), max_length=96, tune_batch=True)
    [path] = profiles_in(cache)
    path.write_text("{not json", encoding="utf-8")
    loaded = load_for_answering(str(tiny_model_dir), max_length=96, tune_batch=True)
    profile = CostProfile.from_dict(json.loads(path.read_text(encoding="utf-8"))["profile"])
    assert loaded.settings.batch_size == batch_profile.choose_batch(profile)


def test_an_unwritable_cache_still_measures(tiny_model_dir: Path, cache: Path) -> None:
    from qa_finetune.modeling.for_answering import load_for_answering

    cache.parent.parent.mkdir(parents=True)
    cache.parent.write_text("a file where the folder should be", encoding="utf-8")
    loaded = load_for_answering(str(tiny_model_dir), max_length=96, tune_batch=True)
    assert 1 <= loaded.settings.batch_size <= 64
    assert cache.parent.read_text(encoding="utf-8") == "a file where the folder should be"


def test_a_flag_a_run_setting_or_the_switch_keep_the_batch_size(
    tiny_model_dir: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qa_finetune.modeling.for_answering import load_for_answering

    flagged = load_for_answering(str(tiny_model_dir), batch_size=3, tune_batch=True)
    assert flagged.settings.batch_size == 3
    assert flagged.profile is None
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run_dir / "model")
    (run_dir / "config.yaml").write_text("inference:\n  batch_size: 5\n", encoding="utf-8")
    assert load_for_answering(str(run_dir), tune_batch=True).settings.batch_size == 5
    assert profiles_in(cache) == []  # nothing was measured
    monkeypatch.setenv(batch_profile.PROFILE_ENV, "off")
    assert load_for_answering(str(tiny_model_dir), tune_batch=True).settings.batch_size == 64


def test_a_profile_for_another_machine_is_not_used(tiny_model_dir: Path, cache: Path) -> None:
    key = profile_cache.profile_key(tiny_model_dir, "tf", (96,))
    flat = CostProfile("tf", {96: {1: 0.01, 2: 0.01}})
    profile_cache.write(key, flat)
    assert profile_cache.read(key) == flat
    assert profile_cache.read({**key, "cpu": "another CPU"}) is None
    assert profile_cache.read({**key, "backend": "onnx"}) is None


def test_real_passes_much_faster_than_the_profile_drop_it_from_the_cache(
    tiny_model_dir: Path, cache: Path
) -> None:
    from qa_finetune.modeling import live_check

    key = profile_cache.profile_key(tiny_model_dir, "tf", (96,))
    # Measured on a busy machine: every pass looked 0.1 s a window.
    busy = CostProfile("tf", {96: {1: 0.1, 2: 0.2, 4: 0.4}})
    profile_cache.write(key, busy)
    check = live_check.LiveCheck(busy, live_check.forget_cached(key))
    # The warm-up passes say nothing, however fast.
    for _ in range(live_check.WARM_UP_PASSES):
        check(2, 96, 0.001)
    # Real passes at 0.06 s a window (0.6 of the profile): it agrees well enough.
    for _ in range(live_check.COMPARED_PASSES - 1):
        check(2, 96, 0.12)
    assert check.verdict is None and profile_cache.read(key) == busy
    check(2, 96, 0.12)
    assert check.verdict == pytest.approx(0.6)
    assert profile_cache.read(key) == busy  # kept: judged once, not faster by DISAGREES
    # Another check where the real passes take 0.04 s a window: 2.5x faster than the profile.
    check = live_check.LiveCheck(busy, live_check.forget_cached(key))
    for _ in range(live_check.WARM_UP_PASSES + live_check.COMPARED_PASSES):
        check(4, 96, 0.16)
    assert check.verdict == pytest.approx(0.4)
    assert profile_cache.read(key) is None  # measured again by the next command


def test_real_passes_slower_than_the_profile_keep_it() -> None:
    from qa_finetune.modeling import live_check

    calls: list[float] = []
    profile = CostProfile("tf", {128: {1: 0.01, 2: 0.02}, 256: {1: 0.02, 2: 0.04}})
    check = live_check.LiveCheck(profile, calls.append, warm_up=0, compared=4)
    # Padded to 192 tokens (between the measured lengths: 0.03 s for 2 windows), 5x slower:
    # the machine is busy now, and measuring now would keep that.
    for _ in range(4):
        check(2, 192, 0.15)
    assert check.verdict == pytest.approx(5.0)
    assert calls == []
    faster = live_check.LiveCheck(profile, calls.append, warm_up=0, compared=4)
    for _ in range(4):
        faster(2, 192, 0.01)
    assert calls == [pytest.approx(1 / 3)]
