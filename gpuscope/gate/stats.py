"""Is the candidate worse than the baseline beyond step-to-step noise? A one-sided two-sample permutation test.

The statistic is the difference of the groups' means, on a log scale for times and dollars (so it is the ratio
of geometric means, and one slow step weighs in proportion, not in microseconds) and as they are for shares.
Under "both groups are steps of one job" every split of the pooled steps into groups of the observed sizes is
equally likely; the p-value is the share of splits whose candidate group is at least as far from the baseline
as the one observed. At the sizes profilers record that count is exact (every split enumerated, up to
``EXACT_MAX_SPLITS``); past that it is estimated from ``RANDOM_SPLITS`` random splits drawn with a fixed seed
(the same data always gives the same p), and past ``RANDOM_MAX_VALUES`` pooled steps from the permutation
distribution's normal approximation, with the exact variance of a mean drawn without replacement. (The normal
approximation alone is too eager at 10-20 steps a side when step times are bimodal, as they often are.)

Time and memory stay bounded whatever the step counts: a split is enumerated as its smaller group (1 step against
5,000 is 5,001 choices of one index, not of 5,000), so the exact count holds at most ``EXACT_MAX_SPLITS`` rows of at
most 8 indices; random splits are drawn ``RANDOM_CHUNK_VALUES`` values at a time; the normal approximation is one
pass over the steps.

It assumes no distribution shape, and unlike a rank test (Mann-Whitney U) it uses how far apart the steps are,
not only their order: at 6 vs 6 steps one baseline step that lands among the candidate's costs a rank test all
power at a 1% level (its p cannot go below 0.02 there), while a permutation test on magnitudes still sees it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Literal

import numpy as np
import numpy.typing as npt

EXACT_MAX_SPLITS = 20_000
RANDOM_SPLITS = 4_000
RANDOM_MAX_VALUES = 2_000
RANDOM_CHUNK_VALUES = 500_000
"""Random splits are shuffled this many values (4 MB) at a time."""

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PermutationTest:
    """Result of testing "candidate values tend to be greater than baseline values"."""

    p_value: float
    """One-sided: the chance, were both groups steps of one job, of a split at least this extreme."""
    difference: float
    """Candidate's mean minus baseline's, on the tested scale (log for ``log=True``)."""
    n_baseline: int
    n_candidate: int
    method: Literal["exact", "random", "normal"]
    min_p_value: float
    """The smallest p-value any data could give at these sizes: above the significance level the test is blind."""


def splits(n_baseline: int, n_candidate: int) -> int:
    return math.comb(n_baseline + n_candidate, n_candidate)


def min_p_value(n_baseline: int, n_candidate: int) -> float:
    """The observed split always counts: at best it is the only one that extreme."""
    if not n_baseline or not n_candidate:
        return 1.0
    log_splits = (math.lgamma(n_baseline + n_candidate + 1) - math.lgamma(n_baseline + 1)
                  - math.lgamma(n_candidate + 1))
    return math.exp(-log_splits)


def greater(baseline: npt.ArrayLike, candidate: npt.ArrayLike, *, log: bool = False) -> PermutationTest:
    """One-sided permutation test that ``candidate`` is greater than ``baseline`` (values > 0 when ``log``)."""
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    n_b, n_c = len(b), len(c)
    if n_b == 0 or n_c == 0:
        raise ValueError("both groups need at least one sample")
    pooled = np.concatenate([b, c])
    if log:
        if np.any(pooled <= 0):
            raise ValueError("log scale needs positive values")
        pooled = np.log(pooled)
    observed = float(pooled[n_b:].sum())
    difference = observed / n_c - float(pooled[:n_b].sum()) / n_b
    floor_p = min_p_value(n_b, n_c)
    method: Literal["exact", "random", "normal"]
    if splits(n_b, n_c) <= EXACT_MAX_SPLITS:
        p, method = _exact_p(pooled, n_b), "exact"
    elif n_b + n_c <= RANDOM_MAX_VALUES:
        p, method = _random_p(pooled, observed, n_c), "random"
        floor_p = max(floor_p, 1.0 / (RANDOM_SPLITS + 1))
    else:
        p, method = _normal_p(pooled, observed, n_c), "normal"
    return PermutationTest(p_value=p, difference=difference, n_baseline=n_b, n_candidate=n_c, method=method,
                           min_p_value=floor_p)


def _exact_p(pooled: Floats, n_b: int) -> float:
    """Every split counted, each enumerated as its smaller group (the baseline's ``n_b`` values come first)."""
    n_c = len(pooled) - n_b
    if n_c <= n_b:
        observed = float(pooled[n_b:].sum())
        sums = pooled[_split_indices(len(pooled), n_c)].sum(axis=1)
        return float(np.mean(sums >= observed - _tolerance(pooled, observed)))
    # The candidate's group is what a baseline-sized group leaves: its sum is at least the observed one exactly when
    # that group's sum is at most the observed baseline's.
    observed = float(pooled[:n_b].sum())
    sums = pooled[_split_indices(len(pooled), n_b)].sum(axis=1)
    return float(np.mean(sums <= observed + _tolerance(pooled, observed)))


def _tolerance(pooled: Floats, observed: float) -> float:
    """Sums equal but for rounding count as equal: a tie is as extreme as the observed split."""
    return 1e-9 * (abs(observed) + float(np.abs(pooled).max()) + 1.0)


@lru_cache(maxsize=32)
def _split_indices(n_total: int, n_group: int) -> npt.NDArray[np.intp]:
    """Every choice of ``n_group`` of ``n_total`` indices, one per row (``math.comb(n_total, n_group)`` rows)."""
    flat = np.fromiter((i for combo in combinations(range(n_total), n_group) for i in combo), dtype=np.intp,
                       count=math.comb(n_total, n_group) * n_group)
    return flat.reshape(-1, n_group)


def _random_p(pooled: Floats, observed: float, n_c: int) -> float:
    """Monte Carlo permutation p-value, counting the observed split itself (so it is never 0)."""
    rng = np.random.default_rng(0)
    rows = max(1, RANDOM_CHUNK_VALUES // len(pooled))
    tolerance = _tolerance(pooled, observed)
    extreme = 0
    for start in range(0, RANDOM_SPLITS, rows):  # the generator's stream is the same drawn in chunks or at once
        shuffled = rng.permuted(np.broadcast_to(pooled, (min(rows, RANDOM_SPLITS - start), len(pooled))), axis=1)
        extreme += int(np.count_nonzero(shuffled[:, :n_c].sum(axis=1) >= observed - tolerance))
    return float((1 + extreme) / (RANDOM_SPLITS + 1))


def _normal_p(pooled: Floats, observed: float, n_c: int) -> float:
    """The candidate group's sum is a sample of n_c drawn without replacement from the pooled values."""
    n = len(pooled)
    mean = n_c * float(pooled.mean())
    variance = n_c * (n - n_c) / (n * (n - 1)) * float(((pooled - pooled.mean()) ** 2).sum())
    spread = 1e-12 * (abs(mean) + 1.0)
    if variance <= spread**2:
        return 1.0
    z = (observed - mean) / math.sqrt(variance)
    return min(1.0, 0.5 * math.erfc(z / math.sqrt(2.0)))
