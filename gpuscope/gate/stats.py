"""Is the candidate worse than the baseline beyond step-to-step noise? A one-sided Mann-Whitney U test.

Rank-based, so one slow step (a garbage-collector pause, a checkpoint write) moves it little, and it assumes
nothing about the shape of the step-time distribution. At the sizes profilers record (5-30 steps) its p-value
is exact: every split of the pooled steps into two groups of the observed sizes is counted, ties included.
Past ``EXACT_MAX_SPLITS`` splits the normal approximation with tie and continuity corrections is used.
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

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class UTest:
    """Result of testing "candidate tends to be greater than baseline"."""

    p_value: float
    """One-sided: the chance, were both groups drawn from one distribution, of a U this large or larger."""
    u: float
    """Pairs (baseline step, candidate step) where the candidate's is greater; ties count one half."""
    n_baseline: int
    n_candidate: int
    method: Literal["exact", "normal"]
    min_p_value: float
    """The smallest p-value any data could give at these sizes: above the significance level, the test is blind."""


def splits(n_baseline: int, n_candidate: int) -> int:
    return math.comb(n_baseline + n_candidate, n_candidate)


def min_p_value(n_baseline: int, n_candidate: int) -> float:
    """At least one split in all: the most extreme arrangement's share of them."""
    return 1.0 / splits(n_baseline, n_candidate) if n_baseline and n_candidate else 1.0


def greater(baseline: npt.ArrayLike, candidate: npt.ArrayLike) -> UTest:
    """One-sided Mann-Whitney U test that ``candidate`` is stochastically greater than ``baseline``."""
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    n_b, n_c = len(b), len(c)
    if n_b == 0 or n_c == 0:
        raise ValueError("both groups need at least one sample")
    ranks = _midranks(np.concatenate([b, c]))
    rank_sum = float(ranks[n_b:].sum())
    u = rank_sum - n_c * (n_c + 1) / 2
    floor_p = min_p_value(n_b, n_c)
    if splits(n_b, n_c) <= EXACT_MAX_SPLITS:
        sums = ranks[_split_indices(n_b + n_c, n_c)].sum(axis=1)
        p = float(np.mean(sums >= rank_sum - 1e-9))
        return UTest(p_value=p, u=u, n_baseline=n_b, n_candidate=n_c, method="exact", min_p_value=floor_p)
    return UTest(p_value=_normal_p(u, ranks, n_b, n_c), u=u, n_baseline=n_b, n_candidate=n_c, method="normal",
                 min_p_value=floor_p)


def _midranks(values: Floats) -> Floats:
    """Ranks 1..N, tied values sharing the mean of the ranks they span."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    mid = ends - (counts - 1) / 2.0
    return np.asarray(mid[inverse], dtype=np.float64)


@lru_cache(maxsize=32)
def _split_indices(n_total: int, n_candidate: int) -> npt.NDArray[np.intp]:
    flat = np.fromiter((i for combo in combinations(range(n_total), n_candidate) for i in combo), dtype=np.intp)
    return flat.reshape(-1, n_candidate)


def _normal_p(u: float, ranks: Floats, n_b: int, n_c: int) -> float:
    n = n_b + n_c
    _, counts = np.unique(ranks, return_counts=True)
    ties = float(np.sum(counts.astype(np.float64) ** 3 - counts))
    variance = n_b * n_c / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return 1.0
    z = (u - n_b * n_c / 2.0 - 0.5) / math.sqrt(variance)
    return min(1.0, 0.5 * math.erfc(z / math.sqrt(2.0)))
