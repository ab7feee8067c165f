"""Step times as a distribution: median, 90th percentile, spread, and the rule that calls a step an outlier.

A mean over a dozen steps moves with one slow step (a checkpoint save, a garbage-collector pause, a late batch):
one 300 ms step among eleven of 22 ms doubles it. The figures here are robust to that:

- median and p90 of the steady steps (p90 by linear interpolation between the closest ranks, numpy's default);
- spread: the scaled median absolute deviation, ``1.4826 x median(|t - median|)``, which estimates the standard
  deviation of normally distributed times and is moved by no single step;
- an outlier is a step longer than ``median + max(K_MAD x spread, FLOOR x median)``. ``K_MAD = 3.5`` is the
  modified z-score cut-off of Iglewicz and Hoaglin (1993) (``0.6745 (t - median) / MAD > 3.5``). The floor keeps
  very regular loops (spread near zero: GPU-bound steps vary by well under 1%) from flagging a step a few percent
  longer: a step is an outlier only when it also takes at least 25% more than the median, the least a one-off
  event costs that is worth a finding. Only long steps are outliers (a short step costs nothing extra), and at
  least ``MIN_STEPS`` steps are needed to tell the typical step from the odd one.

An outlier is rare: at most one step in four (``MAX_SHARE``; at least one) is called one, the longest first. When
more steps than that pass the threshold, the slow steps recur (a stall every third step, a garbage collection
every other one): they are part of the job's usual rhythm and of what it pays per step, not one-off events, so
only the longest of them are set apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

K_MAD = 3.5
"""Iglewicz and Hoaglin's modified z-score cut-off, in scaled MADs above the median."""
FLOOR = 0.25
"""An outlier is at least this fraction of the median longer than the median, whatever the spread."""
MAD_SCALE = 1.4826
"""1 / Phi^-1(3/4): the scaled MAD of normally distributed values equals their standard deviation."""
MIN_STEPS = 3
"""With two steps neither can be told typical; from three on, the median is a step that ran."""
MAX_SHARE = 0.25
"""At most this share of the steps (and at least one) are outliers: more slow steps than that are a rhythm."""


@dataclass(frozen=True)
class StepStats:
    """A set of step times summarised robustly (µs)."""

    median_us: float
    p90_us: float
    spread_us: float
    """The scaled MAD: 1.4826 x the median absolute deviation from the median."""
    threshold_us: float | None
    """Steps longer than this are outliers; None with fewer than ``MIN_STEPS`` steps."""


def step_stats(times_us: Sequence[float] | npt.NDArray[np.float64]) -> StepStats | None:
    """Median, p90, spread and outlier threshold of ``times_us``; None when there are none."""
    t = np.asarray(times_us, dtype=np.float64)
    if t.size == 0:
        return None
    median = float(np.median(t))
    spread = MAD_SCALE * float(np.median(np.abs(t - median)))
    threshold = median + max(K_MAD * spread, FLOOR * median) if t.size >= MIN_STEPS else None
    return StepStats(median_us=median, p90_us=float(np.percentile(t, 90)), spread_us=spread,
                     threshold_us=threshold)


def outlier_mask(times_us: Sequence[float] | npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """True for each step whose time is an outlier by the rule above: past the threshold, and among the longest
    ``max_outliers`` of those."""
    t = np.asarray(times_us, dtype=np.float64)
    stats = step_stats(t)
    if stats is None or stats.threshold_us is None:
        return np.zeros(t.size, dtype=bool)
    past = np.flatnonzero(t > stats.threshold_us)
    keep = past[np.argsort(-t[past], kind="stable")][:max_outliers(t.size)]
    mask = np.zeros(t.size, dtype=bool)
    mask[keep] = True
    return mask


def max_outliers(steps: int) -> int:
    """The most outliers ``steps`` steps can have: a quarter of them, at least one."""
    return max(1, int(steps * MAX_SHARE))


def long_mask(times_us: Sequence[float] | npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Steps past the floor alone (``FLOOR`` x the median above it): every step that could be an outlier of a
    job whose steps include these (a job's step is its slowest rank's, so the job's median is at least each
    rank's). The causes of these are looked up while the rank's events are at hand."""
    t = np.asarray(times_us, dtype=np.float64)
    if t.size < MIN_STEPS:
        return np.zeros(t.size, dtype=bool)
    return t > (1.0 + FLOOR) * float(np.median(t))
