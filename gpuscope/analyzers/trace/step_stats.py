"""The step time, and the steps that are slow: the one module that says what a step costs and which steps stand out.

**The step time is the mean of the steady steps, every one of them** (``step_time_us``): N steps cost N times it,
the step breakdown's parts add up to it, and a stall that recurs is in it as often as it happened. A slow step is
what the job paid too; robust statistics say which steps are slow (the noise), never what a step costs.

Robust figures stand beside it, each named where it is shown:

- median and p90 of the steady steps (p90 by linear interpolation between the closest ranks, numpy's default);
- spread: the scaled median absolute deviation, ``1.4826 x median(|t - median|)``, which estimates the standard
  deviation of normally distributed times and is moved by no single step;
- a **slow** step is one longer than ``median + max(K_MAD x spread, FLOOR x median)`` of the other steps (the
  threshold). ``K_MAD = 3.5`` is the modified z-score cut-off of Iglewicz and Hoaglin (1993)
  (``0.6745 (t - median) / MAD > 3.5``); the floor keeps very regular loops (spread near zero: GPU-bound steps
  vary by well under 1%) from calling a step a few percent longer slow: it must also take at least 25% more than
  the median. Only long steps are slow, and at least ``MIN_STEPS`` steps are needed to tell.

Slow steps are told apart by how they come (``slow_steps``), with this rule:

1. **periodic**: the steps at one phase of a period ``p`` (every p-th step, at least ``MIN_REPEATS`` of them, every
   one in the window) are all slow against the other steps: a stall every 4th step (gradient accumulation, a
   logging or evaluation hook, a DataLoader worker that is always late), provided that slow steps placed at random
   would fall into so complete a pattern less than ``PERIOD_CHANCE`` of the time (4 slow steps of 16 are every 4th
   or 5th step through the window in 5 placements of 1,820: 0.27%; 4 of 8 every other step in 2 of 70: 2.9%, too
   likely to tell a period from chance);
2. **recurring**: of the steps left, two or more are slow: they come back in the window, so the window measured
   how often;
3. **lone**: of the steps left, exactly one is slow: an outlier (a checkpoint save, a garbage-collector pause). One
   occurrence tells no rate, so the diagnosis speaks of it on its own (``diagnosis.outliers``) and takes the
   stage shares over the other steps (the *typical* steps); it stays in the step time, which it was part of.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Times = Sequence[float] | Floats

K_MAD = 3.5
"""Iglewicz and Hoaglin's modified z-score cut-off, in scaled MADs above the median."""
FLOOR = 0.25
"""A slow step is at least this fraction of the median longer than the median, whatever the spread."""
MAD_SCALE = 1.4826
"""1 / Phi^-1(3/4): the scaled MAD of normally distributed values equals their standard deviation."""
MIN_STEPS = 3
"""With two steps neither can be told typical; from three on, the median is a step that ran."""
MIN_REPEATS = 3
"""A period is seen only where it repeats at least this often in the window: two slow steps make any spacing."""
PERIOD_CHANCE = 0.01
"""A periodic pattern is taken as one only when random placement would give one as complete less often than this."""
MAX_PERIOD = 32
"""The longest period looked for, in steps."""
MAX_SEARCHED = 4096
"""Periods are looked for in the first this many steps (the search is quadratic in the period)."""


@dataclass(frozen=True)
class StepStats:
    """A set of step times summarised (µs): the mean they cost, and the robust figures that tell noise."""

    mean_us: float
    """The step time: the mean of every step (``step_time_us``)."""
    median_us: float
    p90_us: float
    spread_us: float
    """The scaled MAD: 1.4826 x the median absolute deviation from the median."""
    threshold_us: float | None
    """Steps longer than this are slow; None with fewer than ``MIN_STEPS`` steps."""


@dataclass(frozen=True)
class SlowSteps:
    """Which of a run's steady steps are slow, and how they come (indices into the steps, in time order)."""

    period: int | None = None
    """The period ``p`` of the periodic slow steps; None when none recur at a period."""
    periodic: tuple[int, ...] = ()
    """The steps of the slow phase(s) of ``period``."""
    recurring: tuple[int, ...] = ()
    """Two or more other slow steps: they recur, at no one period."""
    lone: int | None = None
    """The one slow step left, when exactly one is: the outlier."""
    reference_us: float | None = None
    """The median of the steps that are not slow: what a slow step's extra time is measured from."""

    @property
    def repeated(self) -> tuple[int, ...]:
        """Every slow step that recurs (periodic or not), in time order."""
        return tuple(sorted(self.periodic + self.recurring))


def step_time_us(times_us: Times) -> float | None:
    """The step time of these steps: their mean, every step counted (None without steps)."""
    t = np.asarray(times_us, dtype=np.float64)
    return float(t.mean()) if t.size else None


def threshold_us(times_us: Times) -> float | None:
    """The slow-step threshold of these steps: ``median + max(K_MAD x spread, FLOOR x median)``; None with fewer
    than ``MIN_STEPS``."""
    t = np.asarray(times_us, dtype=np.float64)
    if t.size < MIN_STEPS:
        return None
    median = float(np.median(t))
    spread = MAD_SCALE * float(np.median(np.abs(t - median)))
    return median + max(K_MAD * spread, FLOOR * median)


def step_stats(times_us: Times) -> StepStats | None:
    """Mean, median, p90, spread and slow-step threshold of ``times_us``; None when there are none."""
    t = np.asarray(times_us, dtype=np.float64)
    if t.size == 0:
        return None
    median = float(np.median(t))
    spread = MAD_SCALE * float(np.median(np.abs(t - median)))
    return StepStats(mean_us=float(t.mean()), median_us=median, p90_us=float(np.percentile(t, 90)),
                     spread_us=spread, threshold_us=threshold_us(t))


def slow_steps(times_us: Times) -> SlowSteps:
    """The slow steps of ``times_us`` (in time order) by the module's rule: periodic, recurring, or one lone."""
    t = np.asarray(times_us, dtype=np.float64)
    if t.size < MIN_STEPS:
        return SlowSteps()
    period, periodic = find_period(t)
    rest = np.setdiff1d(np.arange(t.size), periodic)
    limit = threshold_us(t[rest])
    slow = rest[t[rest] > limit] if limit is not None else rest[:0]
    recurring = tuple(int(i) for i in slow) if slow.size > 1 else ()
    lone = int(slow[0]) if slow.size == 1 else None
    flagged = np.concatenate([np.asarray(periodic, dtype=np.intp), slow])
    normal = np.setdiff1d(np.arange(t.size), flagged)
    reference = float(np.median(t[normal])) if normal.size else None
    return SlowSteps(period=period, periodic=periodic, recurring=recurring, lone=lone, reference_us=reference)


def find_period(t: Floats) -> tuple[int | None, tuple[int, ...]]:
    """The shortest period ``p`` (2 to ``MAX_PERIOD``) at which the steps of one phase, ``MIN_REPEATS`` or more,
    are all slow against the other steps, and chance would rarely place that many slow steps so
    (``periodic_chance``); (p, those steps) or (None, ())."""
    n = min(t.size, MAX_SEARCHED)
    for p in range(2, min(MAX_PERIOD, n // MIN_REPEATS) + 1):
        slow = [idx for phase in range(p) if (idx := np.arange(phase, n, p)).size >= MIN_REPEATS
                and (limit := threshold_us(np.delete(t[:n], idx))) is not None and float(t[idx].min()) > limit]
        if len(slow) == 1 and periodic_chance(n, slow[0].size) < PERIOD_CHANCE:
            return p, tuple(int(i) for i in slow[0])
    return None, ()


def periodic_chance(n: int, k: int) -> float:
    """The chance that ``k`` slow steps placed at random among ``n`` are every p-th step through the window for
    some period p from 2 to ``MAX_PERIOD``: the phases of exactly ``k`` steps, over the placements."""
    patterns = sum(1 for p in range(2, MAX_PERIOD + 1) for phase in range(p) if len(range(phase, n, p)) == k)
    return patterns / math.comb(n, k)


def lone_mask(times_us: Times) -> npt.NDArray[np.bool_]:
    """True for the lone slow step (the outlier), when the steps have one."""
    t = np.asarray(times_us, dtype=np.float64)
    mask = np.zeros(t.size, dtype=bool)
    lone = slow_steps(t).lone
    if lone is not None:
        mask[lone] = True
    return mask


def long_mask(times_us: Times) -> npt.NDArray[np.bool_]:
    """Steps past the floor alone (``FLOOR`` x the median above it): every step that could be slow in a job whose
    steps include these (a job's step is its slowest rank's, so the job's median is at least each rank's). The
    causes of these are looked up while the rank's events are at hand."""
    t = np.asarray(times_us, dtype=np.float64)
    if t.size < MIN_STEPS:
        return np.zeros(t.size, dtype=bool)
    return t > (1.0 + FLOOR) * float(np.median(t))
