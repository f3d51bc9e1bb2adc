"""The batch size and backend chosen from cost profiles: a pure function, made-up profiles."""

from __future__ import annotations

import pytest

from qa_finetune.modeling.batch_policy import (
    CostProfile,
    batch_for_length,
    choose_backend,
    choose_batch,
    serving_batch,
)

SIZES = (1, 2, 4, 8, 16, 32, 64)


def cpu_like(slope: float = 0.15) -> CostProfile:
    """A window costs more the more windows share its pass (caches overflow, cores full)."""
    return CostProfile(
        "tf",
        {
            length: {b: b * length * 1e-4 * (1 + slope * (b - 1)) for b in SIZES}
            for length in (128, 384)
        },
    )


def gpu_like() -> CostProfile:
    """A pass costs the same for 1 or 64 windows."""
    return CostProfile("tf", {length: {b: length * 1e-5 for b in SIZES} for length in (128, 384)})


def test_a_cpu_like_profile_chooses_one_window_a_pass() -> None:
    assert choose_batch(cpu_like()) == 1


def test_a_gpu_like_profile_chooses_the_largest_batch() -> None:
    assert choose_batch(gpu_like()) == 64
    assert choose_batch(gpu_like(), most=16) == 16


def test_a_sweet_spot_in_the_middle_is_found() -> None:
    # Per window: 1.0, 0.7, 0.5, 0.6 (x 1e-3 s); 4 is the cheapest.
    per_window = {1: 1.0, 2: 0.7, 4: 0.5, 8: 0.6}
    profile = CostProfile("onnx", {256: {b: b * c * 1e-3 for b, c in per_window.items()}})
    assert choose_batch(profile) == 4
    assert profile.windows_per_second(4) == pytest.approx(2000.0)


@pytest.mark.parametrize(("dearer", "chosen"), [(0.97, 8), (1.08, 8), (1.15, 2)])
def test_within_the_tolerance_the_larger_batch_wins(dearer: float, chosen: int) -> None:
    # 8 windows a pass cost ``dearer`` times what a window costs in a pass of 2: within the
    # spread of the timings (10%) the larger pass is taken, past it the cheaper one.
    profile = CostProfile("tf", {128: {1: 1.0, 2: 2 * 0.5, 8: 8 * 0.5 * dearer}})
    assert choose_batch(profile) == chosen


def test_only_sizes_measured_at_every_length_count() -> None:
    # 4 was measured at 128 only (the measurement stopped): it cannot be compared.
    profile = CostProfile("tf", {128: {1: 1.0, 2: 1.0, 4: 0.1}, 384: {1: 3.0, 2: 4.0}})
    assert profile.batches() == [1, 2]
    assert choose_batch(profile) == 2  # per window: 1 + 3 = 4 at 1, 0.5 + 2 = 2.5 at 2


def test_profiles_round_trip_through_json_form() -> None:
    profile = cpu_like()
    assert CostProfile.from_dict(profile.to_dict()) == profile


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"backend": "tf"},
        {"backend": "tf", "seconds": []},
        {"backend": "tf", "seconds": {}},
        {"backend": "tf", "seconds": {"128": {"1": 0.0}}},
        {"backend": "tf", "seconds": {"128": {"1": "fast"}}},
    ],
)
def test_malformed_profiles_are_refused(values: dict) -> None:
    with pytest.raises(ValueError, match="not a cost profile"):
        CostProfile.from_dict(values)


def test_the_backend_with_more_windows_per_second_is_chosen() -> None:
    tf = CostProfile("tf", {384: {1: 0.071, 2: 0.150}})
    onnx = CostProfile("onnx", {384: {1: 0.122, 2: 0.230}})
    assert choose_backend({"tf": tf, "onnx": onnx}) == "tf"
    faster_onnx = CostProfile("onnx", {384: {1: 0.060, 2: 0.130}})
    assert choose_backend({"tf": tf, "onnx": faster_onnx}) == "onnx"
    with pytest.raises(ValueError):
        choose_backend({})


def measured_here() -> CostProfile:
    """Seconds measured on a 2-core AMD EPYC (MiniLM, TensorFlow): batching pays at 128
    tokens and not at 384."""
    return CostProfile(
        "tf", {128: {1: 0.095, 2: 0.112, 4: 0.163}, 384: {1: 0.197, 2: 0.408, 4: 0.753}}
    )


def test_estimate_is_exact_where_measured_and_on_the_line_between() -> None:
    profile = measured_here()
    assert profile.estimate(2, 384) == pytest.approx(0.408)
    assert profile.estimate(4, 128) == pytest.approx(0.163)
    assert profile.estimate(3, 128) == pytest.approx((0.112 + 0.163) / 2)
    assert profile.estimate(1, 256) == pytest.approx((0.095 + 0.197) / 2)
    # Past the largest batch: its cost per window.
    assert profile.estimate(8, 384) == pytest.approx(0.753 * 2)


def test_estimate_below_the_shortest_length_stays_positive_and_grows_with_length() -> None:
    profile = measured_here()
    costs = [profile.estimate(1, length) for length in (8, 32, 64, 128)]
    assert all(c > 0 for c in costs)
    assert costs == sorted(costs)
    single = CostProfile("onnx", {256: {1: 0.2, 4: 0.4}})
    assert single.estimate(4, 128) == pytest.approx(0.2)
    assert single.estimate(2, 256) == pytest.approx(0.2 + 0.2 / 3)


def short_batch_well_long_do_not() -> CostProfile:
    """The 2-core AMD EPYC's shape (bench/reports/09-serve.md), ms per window by batch: short
    windows get cheaper up to 8 a pass, long ones dearer from 2."""
    per_window = {
        128: {1: 46.0, 2: 41.0, 4: 33.5, 8: 32.7},
        256: {1: 89.0, 2: 79.0, 4: 74.0, 8: 75.0},
        384: {1: 106.0, 2: 121.0, 4: 120.0, 8: 169.0},
    }
    return CostProfile(
        "tf", {n: {b: ms * b / 1000 for b, ms in row.items()} for n, row in per_window.items()}
    )


def test_each_length_gets_its_own_pass_size() -> None:
    profile = short_batch_well_long_do_not()
    assert batch_for_length(profile, 128) == 8
    assert batch_for_length(profile, 256) == 8  # 75 against 74: a tie, the larger wins
    assert batch_for_length(profile, 384) == 1  # 2 and 4 cost 13% more a window
    # One size for all lengths is the smaller compromise: the sum per window is least at 4.
    assert choose_batch(profile) == 4
    assert serving_batch(profile) == 8


def test_between_measured_lengths_the_estimate_decides() -> None:
    profile = short_batch_well_long_do_not()
    sizes = [batch_for_length(profile, n) for n in range(100, 385, 4)]
    assert set(sizes) <= {1, 2, 4, 8}
    assert sizes[0] == 8 and sizes[-1] == 1
    assert sizes == sorted(sizes, reverse=True)  # longer windows never get bigger passes


def test_a_gpu_like_profile_batches_every_length_fully() -> None:
    profile = gpu_like()
    assert {batch_for_length(profile, n) for n in (64, 128, 300, 384)} == {64}
    assert serving_batch(profile) == 64
