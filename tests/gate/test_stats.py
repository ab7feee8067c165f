"""The one-sided Mann-Whitney U test: exact counts at small sizes, the normal approximation past them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.gate import stats


def test_fully_separated_groups_give_the_smallest_p_the_sizes_allow() -> None:
    test = stats.greater([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12])
    assert test.method == "exact" and test.u == 36
    assert test.p_value == pytest.approx(1 / math.comb(12, 6)) == pytest.approx(test.min_p_value)
    assert stats.greater([7, 8, 9, 10, 11, 12], [1, 2, 3, 4, 5, 6]).p_value == 1.0


def test_exact_p_counts_the_splits_at_least_as_extreme() -> None:
    # U = 31 of 36 for 6 vs 6: 19 of the 924 splits reach it (partitions of 0..5 into at most 6 parts <= 6).
    base = [123079, 124198, 126183, 127181, 163461, 182306]
    cand = [165983, 174564, 175153, 179733, 182172, 187948]
    test = stats.greater(base, cand)
    assert test.u == 31 and test.p_value == pytest.approx(19 / 924)


def test_ties_count_half_and_identical_groups_are_far_from_significant() -> None:
    test = stats.greater([0, 0, 0, 1], [0, 0, 0, 1])
    assert test.u == 8 and test.p_value > 0.5
    assert stats.greater([5.0] * 30, [5.0] * 30).p_value == 1.0  # normal path: no variance, no evidence


def test_normal_approximation_agrees_with_the_exact_count_near_its_switch() -> None:
    rng = np.random.default_rng(3)
    base, cand = rng.normal(100, 10, 8), rng.normal(108, 10, 8)
    exact = stats.greater(base, cand)
    assert exact.method == "exact"
    wide = stats.greater(np.concatenate([base, base + 1e-6]), np.concatenate([cand, cand + 1e-6]))
    assert wide.method == "normal"
    assert 0 < wide.p_value < exact.p_value  # twice the evidence, the same direction
    assert abs(stats._normal_p(exact.u, stats._midranks(np.concatenate([base, cand])), 8, 8)
               - exact.p_value) < 0.02


def test_empty_group_is_refused() -> None:
    with pytest.raises(ValueError):
        stats.greater([], [1.0])


samples = st.lists(st.integers(0, 20).map(float), min_size=1, max_size=9)


@settings(max_examples=60, deadline=None)
@given(samples, samples)
def test_p_values_are_probabilities_and_the_two_directions_cover_everything(b: list[float], c: list[float]) -> None:
    up, down = stats.greater(b, c), stats.greater(c, b)
    assert 0 < up.p_value <= 1 and 0 < down.p_value <= 1
    assert up.p_value >= up.min_p_value - 1e-12
    assert up.p_value + down.p_value >= 1 - 1e-9  # P(S >= s) + P(S <= s) >= 1
