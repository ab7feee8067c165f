"""The robust step statistics and the outlier rule, on step times whose answers are known by construction."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.trace.step_stats import long_mask, outlier_mask, step_stats
from tests import reference


def test_one_slow_step_among_twelve_is_the_one_outlier() -> None:
    times = [22_000.0] * 11 + [320_000.0]
    stats = step_stats(times)
    assert stats is not None
    assert stats.median_us == 22_000 and stats.spread_us == 0
    # The spread is 0, so the floor sets the threshold: a quarter over the median.
    assert stats.threshold_us == pytest.approx(22_000 * 1.25)
    assert outlier_mask(times).tolist() == [False] * 11 + [True]


def test_the_spread_is_the_scaled_median_absolute_deviation() -> None:
    # Median 175; deviations 75, 125, 25, 825, 25, 55 have median 65; 1.4826 x 65 = 96.369.
    times = [100.0, 300.0, 200.0, 1000.0, 150.0, 120.0]
    stats = step_stats(times)
    assert stats is not None
    assert stats.median_us == 175 and stats.spread_us == pytest.approx(1.4826 * 65)
    assert stats.threshold_us == pytest.approx(175 + 3.5 * 1.4826 * 65)
    assert outlier_mask(times).tolist() == [False, False, False, True, False, False]


def test_p90_interpolates_between_the_closest_ranks() -> None:
    # Ten steps 1..10: rank 0.9 x 9 = 8.1, between 9 and 10.
    stats = step_stats([float(x) for x in range(10, 0, -1)])
    assert stats is not None and stats.p90_us == pytest.approx(9.1)


def test_regular_steps_flag_nothing_however_small_their_spread() -> None:
    times = [10_000.0, 10_001.0, 10_002.0, 10_000.0, 10_300.0, 10_001.0]  # 3% long: spread 1.5 µs, under the floor
    assert not outlier_mask(times).any()
    assert not outlier_mask([5_000.0] * 8).any()


def test_two_steps_are_too_few_and_three_are_enough() -> None:
    assert not outlier_mask([1_000.0, 9_000.0]).any()
    stats = step_stats([1_000.0, 9_000.0])
    assert stats is not None and stats.threshold_us is None
    assert outlier_mask([1_000.0, 1_000.0, 9_000.0]).tolist() == [False, False, True]
    assert not outlier_mask([1_000.0, 1_000.0, 1_200.0]).any()  # 20% over the median: under the floor


def test_short_steps_are_never_outliers() -> None:
    assert not outlier_mask([10_000.0] * 6 + [100.0]).any()


def test_candidates_past_the_floor_include_every_outlier() -> None:
    # Median 1,100: the floor is at 1,375; the outlier threshold at 1,100 + 3.5 x 1.4826 x 100 = 1,618.9.
    times = [1_000.0, 1_100.0, 1_400.0, 1_000.0, 5_000.0]
    assert long_mask(times).tolist() == [False, False, True, False, True]
    assert outlier_mask(times).tolist() == [False, False, False, False, True]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1.0, 1e7), min_size=0, max_size=40))
def test_the_rule_matches_its_statement_and_keeps_the_majority(times: list[float]) -> None:
    out = outlier_mask(times)
    assert not (out & ~long_mask(times)).any()
    kept = [t for t, o in zip(times, out) if not o]
    assert kept == reference.typical_steps_us(times)
    assert len(kept) > len(times) / 2 or not times
    if times:
        assert not (np.asarray(times)[out] <= float(np.median(times))).any()
