"""The one-sided permutation test: exact counts at small sizes, the normal approximation past them."""

from __future__ import annotations

import math
import tracemalloc
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


def _largest_exact(small: int) -> int:
    """The most steps the other group may have for every split of the two to be counted."""
    large = small
    while stats.splits(small, large + 1) <= stats.EXACT_MAX_SPLITS:
        large += 1
    return large


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8).flatmap(lambda k: st.tuples(st.just(k), st.integers(k, _largest_exact(k)))), st.booleans())
def test_an_exact_count_enumerates_the_smaller_group_and_at_most_its_bound(sizes: tuple[int, int],
                                                                          small_is_baseline: bool) -> None:
    small, large = sizes
    n_b, n_c = (small, large) if small_is_baseline else (large, small)
    seen: list[tuple[int, int]] = []
    real = stats._split_indices

    def spy(n_total: int, n_group: int) -> np.ndarray:
        indices = real(n_total, n_group)
        seen.append(indices.shape)
        return indices

    rng = np.random.default_rng(small)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stats, "_split_indices", spy)
        test = stats.greater(rng.normal(100, 5, n_b), rng.normal(100, 5, n_c))
    assert test.method == "exact" and seen == [(stats.splits(n_b, n_c), min(small, large))]
    assert seen[0][0] <= stats.EXACT_MAX_SPLITS


@pytest.mark.parametrize(("n_b", "n_c"), [(1, 5_000), (5_000, 1), (1, 19_999), (2, 150), (1_000, 1_000),
                                          (3_000, 3_000)])
def test_memory_stays_bounded_whatever_the_step_counts(n_b: int, n_c: int) -> None:
    rng = np.random.default_rng(1)
    base, cand = rng.lognormal(4.6, 0.1, n_b), rng.lognormal(4.6, 0.1, n_c)
    stats._split_indices.cache_clear()
    tracemalloc.start()
    try:
        stats.greater(base, cand, log=True)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Enumerating the larger group of 1 vs 19,999 would hold 20,000 x 19,999 indices (3.2 GB); shuffling all 4,000
    # random splits of 2,000 steps at once, 64 MB.
    assert peak_bytes < 12 * 2**20


def test_a_small_baseline_against_a_large_candidate_counts_the_same_splits_by_brute_force() -> None:
    base = [10.0, 31.0]
    cand = [12.0, 30.0, 9.0, 40.0, 25.0, 22.0, 11.0]
    pooled = base + cand
    observed = sum(cand)
    extreme = sum(sum(pooled[i] for i in idx) >= observed - 1e-9 for idx in combinations(range(9), 7))
    assert stats.greater(base, cand).p_value == pytest.approx(extreme / math.comb(9, 7))
    assert stats.greater(cand, base).p_value == pytest.approx(
        sum(sum(pooled[i] for i in idx) >= sum(base) - 1e-9 for idx in combinations(range(9), 2)) / math.comb(9, 2))
