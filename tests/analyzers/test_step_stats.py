"""The step time, the robust step statistics and the slow-step rule, on step times whose answers are known by
construction."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.trace.step_stats import (
    lone_mask,
    long_mask,
    periodic_chance,
    slow_steps,
    step_stats,
    step_time_us,
)
from tests import reference


def test_the_step_time_is_the_mean_of_every_step() -> None:
    times = [22_000.0] * 11 + [320_000.0]
    assert step_time_us(times) == pytest.approx((11 * 22_000 + 320_000) / 12)
    assert step_time_us([]) is None


def test_one_slow_step_among_twelve_is_the_lone_outlier() -> None:
    times = [22_000.0] * 11 + [320_000.0]
    stats = step_stats(times)
    assert stats is not None
    assert stats.median_us == 22_000 and stats.spread_us == 0 and stats.mean_us == step_time_us(times)
    # The spread is 0, so the floor sets the threshold: a quarter over the median.
    assert stats.threshold_us == pytest.approx(22_000 * 1.25)
    assert lone_mask(times).tolist() == [False] * 11 + [True]
    slow = slow_steps(times)
    assert slow.lone == 11 and slow.period is None and slow.repeated == () and slow.reference_us == 22_000


def test_a_stall_every_fourth_step_is_periodic_not_an_outlier() -> None:
    times = [30_000.0 + (60_000.0 if i % 4 == 3 else 0.0) for i in range(16)]
    slow = slow_steps(times)
    assert slow.period == 4 and slow.periodic == (3, 7, 11, 15) and slow.lone is None
    assert slow.reference_us == 30_000 and not lone_mask(times).any()


def test_a_stall_every_other_step_is_found_though_it_moves_the_median() -> None:
    times = [30_000.0 + (60_000.0 if i % 2 else 0.0) for i in range(12)]  # median 60 ms: between the two speeds
    slow = slow_steps(times)
    assert slow.period == 2 and slow.periodic == (1, 3, 5, 7, 9, 11) and slow.reference_us == 30_000


def test_two_slow_steps_at_no_period_recur_and_a_checkpoint_beside_a_period_is_lone() -> None:
    times = [20_000.0] * 12
    times[2], times[9] = 80_000.0, 70_000.0
    slow = slow_steps(times)
    assert slow.recurring == (2, 9) and slow.lone is None and slow.period is None
    periodic = [30_000.0 + (60_000.0 if i % 4 == 3 else 0.0) for i in range(16)]
    periodic[5] = 400_000.0  # a checkpoint save, at no phase of the period
    slow = slow_steps(periodic)
    assert slow.period == 4 and slow.lone == 5 and slow.recurring == ()


def test_the_spread_is_the_scaled_median_absolute_deviation() -> None:
    # Median 175; deviations 75, 125, 25, 825, 25, 55 have median 65; 1.4826 x 65 = 96.369.
    times = [100.0, 300.0, 200.0, 1000.0, 150.0, 120.0]
    stats = step_stats(times)
    assert stats is not None
    assert stats.median_us == 175 and stats.spread_us == pytest.approx(1.4826 * 65)
    assert stats.threshold_us == pytest.approx(175 + 3.5 * 1.4826 * 65)
    assert lone_mask(times).tolist() == [False, False, False, True, False, False]


def test_p90_interpolates_between_the_closest_ranks() -> None:
    # Ten steps 1..10: rank 0.9 x 9 = 8.1, between 9 and 10.
    stats = step_stats([float(x) for x in range(10, 0, -1)])
    assert stats is not None and stats.p90_us == pytest.approx(9.1)


def test_regular_steps_flag_nothing_however_small_their_spread() -> None:
    times = [10_000.0, 10_001.0, 10_002.0, 10_000.0, 10_300.0, 10_001.0]  # 3% long: spread 1.5 µs, under the floor
    assert slow_steps(times).repeated == () and not lone_mask(times).any()
    assert slow_steps([5_000.0] * 8) == slow_steps([5_000.0] * 8).__class__(reference_us=5_000.0)


def test_two_steps_are_too_few_and_three_are_enough() -> None:
    assert not lone_mask([1_000.0, 9_000.0]).any()
    stats = step_stats([1_000.0, 9_000.0])
    assert stats is not None and stats.threshold_us is None
    assert lone_mask([1_000.0, 1_000.0, 9_000.0]).tolist() == [False, False, True]
    assert not lone_mask([1_000.0, 1_000.0, 1_200.0]).any()  # 20% over the median: under the floor


def test_short_steps_are_never_slow() -> None:
    assert not lone_mask([10_000.0] * 6 + [100.0]).any()


def test_candidates_past_the_floor_include_every_slow_step() -> None:
    # Median 1,100: the floor is at 1,375; the threshold of the steps at 1,100 + 3.5 x 1.4826 x 100 = 1,618.9.
    times = [1_000.0, 1_100.0, 1_400.0, 1_000.0, 5_000.0]
    assert long_mask(times).tolist() == [False, False, True, False, True]
    assert lone_mask(times).tolist() == [False, False, False, False, True]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(1.0, 1e7), min_size=0, max_size=40))
def test_the_rule_matches_its_statement(times: list[float]) -> None:
    slow = slow_steps(times)
    period, periodic, recurring, lone = reference.slow_steps(times)
    assert (slow.period, list(slow.periodic), list(slow.recurring), slow.lone) == (period, periodic, recurring, lone)
    assert len(slow.periodic) <= math.ceil(len(times) / 2)  # one phase (of 9 steps, every other one is 5)
    flagged = [*slow.periodic, *slow.recurring, *([slow.lone] if slow.lone is not None else [])]
    if flagged:  # every slow step is longer than the steps' median and than the steps called normal
        assert min(times[i] for i in flagged) > float(np.median(times)) or slow.periodic
        assert slow.reference_us is not None and min(times[i] for i in flagged) > slow.reference_us


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(3, 8), st.floats(0.5, 50.0), st.floats(1_000.0, 1e6))
def test_a_stall_at_a_fixed_period_is_found_at_that_period(period: int, repeats: int, k: float,
                                                          base_us: float) -> None:
    """Steps of one length with every ``period``-th step ``k`` times the length longer (past the 25% floor): the
    rule finds that period and those steps, and no outlier, wherever chance would rarely place that many slow steps
    so; elsewhere they recur at no period told."""
    times = [base_us * (1 + k) if i % period == period - 1 else base_us for i in range(period * repeats)]
    slow = slow_steps(times)
    every = tuple(range(period - 1, period * repeats, period))
    assert slow.lone is None
    if periodic_chance(len(times), repeats) < 0.01:
        assert slow.period == period and slow.periodic == every and slow.reference_us == base_us
    else:  # slow steps that recur at no period told (none at all when they are half the steps)
        assert slow.period is None and slow.recurring in (every, ())


def test_the_chance_of_a_periodic_pattern_counts_its_placements() -> None:
    # 4 slow steps of 16 every 4th (4 phases) or every 5th (steps 0, 5, 10, 15): 5 of C(16, 4) = 1,820 placements.
    assert periodic_chance(16, 4) == pytest.approx(5 / 1820)
    assert periodic_chance(8, 4) == pytest.approx(2 / 70)  # every other step of 8: too likely to tell
