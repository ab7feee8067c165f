"""The one-sided permutation test: exact counts at small sizes, the normal approximation past them."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.gate import stats


def test_fully_separated_groups_give_the_smallest_p_the_sizes_allow() -> None:
    test = stats.greater([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12])
    assert test.method == "exact" and test.difference == 6
    assert test.p_value == pytest.approx(1 / math.comb(12, 6)) == pytest.approx(test.min_p_value)
    assert stats.greater([7, 8, 9, 10, 11, 12], [1, 2, 3, 4, 5, 6]).p_value == 1.0


def test_exact_p_counts_the_splits_at_least_as_extreme_by_brute_force() -> None:
    base = [123079.0, 124198, 126183, 127181, 163461, 182306]
    cand = [165983.0, 174564, 175153, 179733, 182172, 187948]
    pooled = np.log(base + cand)
    observed = pooled[6:].sum()
    extreme = sum(pooled[list(idx)].sum() >= observed - 1e-9 for idx in combinations(range(12), 6))
    test = stats.greater(base, cand, log=True)
    assert test.p_value == pytest.approx(extreme / 924) and test.p_value < 0.01
    assert test.difference == pytest.approx(np.log(cand).mean() - np.log(base).mean())


def test_identical_groups_are_far_from_significant() -> None:
    assert stats.greater([0, 0, 0, 1], [0, 0, 0, 1]).p_value > 0.5
    assert stats.greater([5.0] * 30, [5.0] * 30).p_value == 1.0  # normal path: no spread, no evidence


def test_random_splits_and_the_normal_approximation_agree_with_the_exact_count() -> None:
    rng = np.random.default_rng(3)
    base, cand = rng.normal(100, 10, 8), rng.normal(110, 10, 8)
    exact = stats.greater(base, cand)
    assert exact.method == "exact"
    pooled = np.concatenate([base, cand])
    observed = float(cand.sum())
    assert abs(stats._random_p(pooled, observed, 8) - exact.p_value) < 0.01
    assert abs(stats._normal_p(pooled, observed, 8) - exact.p_value) < 0.02
    wide = stats.greater(np.concatenate([base, base]), np.concatenate([cand, cand]))
    assert wide.method == "random" and 0 < wide.p_value < exact.p_value  # twice the evidence
    assert wide.p_value == stats.greater(np.concatenate([base, base]), np.concatenate([cand, cand])).p_value
    big = stats.greater(rng.normal(100, 10, 1500), rng.normal(100.5, 10, 1500))
    assert big.method == "normal" and 0 < big.p_value < 1


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError):
        stats.greater([], [1.0])
    with pytest.raises(ValueError):
        stats.greater([0.0, 1.0], [1.0], log=True)


samples = st.lists(st.integers(1, 20).map(float), min_size=1, max_size=9)


@settings(max_examples=60, deadline=None)
@given(samples, samples, st.booleans())
def test_p_values_are_probabilities_and_the_two_directions_cover_everything(b: list[float], c: list[float],
                                                                          log: bool) -> None:
    up, down = stats.greater(b, c, log=log), stats.greater(c, b, log=log)
    assert 0 < up.p_value <= 1 and 0 < down.p_value <= 1
    assert up.p_value >= up.min_p_value - 1e-12
    # P(S >= s) + P(S <= s) >= 1 exactly; estimated from random splits (two draws), within their sampling error.
    slack = 4 / stats.RANDOM_SPLITS ** 0.5 if "random" in (up.method, down.method) else 1e-9
    assert up.p_value + down.p_value >= 1 - slack
