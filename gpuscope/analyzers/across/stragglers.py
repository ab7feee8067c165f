"""Stragglers from matched collectives: how long the others wait for a rank, why it is late, and whether that wait
recurs step after step.

At each matched collective the rank that arrives last holds the others: each other rank waits from its own arrival
to the last one's (at most its own time in the collective: it cannot have waited longer than it spent there). Not
all of that wait is the last rank's doing. A rank's arrival is its release (the end of its previous collective) plus
its lead-in (what it did since), and ranks are not released together: a ring all-reduce over gloo lets its ranks go
one after another, milliseconds apart, and the one let go last arrives last at the next collective with no more work
done. So a rank r's wait for the last rank s is the part of its wait that s's longer lead-in accounts for: at most
s's lead-in less r's (what r would have been spared had s done no more than r since its release). A rank's
``wait_caused_us`` is that wait at the collectives it reached last, summed, averaged over the other ranks and divided
by the steps. What makes a straggler is that wait, not how often the rank is last: a rank 300 ms late at one
collective in four makes the others wait most of their step although it is last at a quarter of them. It stands out
when

- the wait matters: ``score``, its wait caused over the job's step time, is ``MIN_SCORE`` or more, and
- the wait recurs: in each step it makes the others wait at least ``UNIT_SHARE`` of that threshold or it does not;
  if no rank were systematically late, the steps in which one does would fall on each of the n ranks alike, so the
  count is binomial(steps, 1/n), and the rank's chance of counting that often or more (``p_value``) must be under
  ``ALPHA`` shared over the ranks (Bonferroni). Where the job has too few steps for that test to tell anything
  (one step cannot be told from chance), the units are the matched collectives instead, each with its share of the
  step's threshold.

Its cause is the step-breakdown part in which it spent the most more than the others (their median) in the time
before the collectives it reached last.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.across.arrivals import arrivals
from gpuscope.analyzers.across.match import Matched
from gpuscope.analyzers.across.timeline import PARTS
from gpuscope.analyzers.across.waits import Waits, waits
from gpuscope.model.across import Arrivals, StragglerRank

ALPHA = 0.05
MIN_SCORE = 0.05
UNIT_SHARE = 0.5
THRESHOLD = (f"a rank is a straggler when the others wait for it at least {MIN_SCORE:.0%} of their step on "
             f"average, and in more of the steps than chance allows (a step counts when they wait for it at least "
             f"{UNIT_SHARE * MIN_SCORE:.1%} of it; binomial test, p < {ALPHA:g} shared over the ranks; with too few "
             f"steps for that test, its collectives count instead)")
_CAUSES = {
    "kernel": "longer GPU compute before them",
    "memcpy": "host-device copies before them",
    "memset": "memsets before them",
    "runtime": "CUDA runtime calls (launches, synchronisations) before them",
    "dataloader": "its own data loading (in the DataLoader) before them",
    "cpu_exec": "more host work in profiled ops before them",
    "other": "host time no profiled event covers before them (sleep, blocking I/O, Python outside profiled ops)",
}


@dataclass(frozen=True)
class Assessment:
    """What the matched collectives say: the arrivals, the stragglers (not yet priced), and for each straggler the
    wait it caused each other rank per step."""

    arrivals: Arrivals
    stragglers: tuple[StragglerRank, ...]
    waits_us: tuple[tuple[tuple[int, float], ...], ...]
    """Per straggler (same order): (rank, µs per step it waited for the straggler), every rank it shares
    collectives with."""


def assess(m: Matched, *, step_us: float | None, steps: int, devices: Mapping[int, str | None]) -> Assessment:
    """Arrivals and stragglers of matched collectives. ``step_us``: the job's step time (the window without
    profiler steps); ``steps``: the steps the collectives came from; ``devices``: each rank's GPU model."""
    steps = max(steps, 1)
    w = waits(m)
    present = m.present
    p = present.astype(float)
    sharers = (p @ p.T) > 0
    np.fill_diagonal(sharers, False)
    n_c = present.sum(axis=0)
    last_in = np.bincount(w.last, minlength=len(m.ranks))
    taken = present.sum(axis=1)
    stragglers, waits_us = [], []
    for s in range(len(m.ranks)):
        others = np.flatnonzero(sharers[s])
        if not others.size or not taken[s]:
            continue
        caused = float(w.wait_for_us[others, s].sum() / others.size / steps)
        score = min(caused / step_us, 1.0) if step_us else 0.0
        chance = float(np.mean(1.0 / n_c[present[s]]))
        test = _consistency(m, w, s, others, steps=steps, step_us=step_us, chance=chance, ranks=len(m.ranks))
        if test.p_value >= ALPHA / len(m.ranks) or score < MIN_SCORE:
            continue
        part, part_us = _cause(m, s, w.last == s, others, steps)
        stragglers.append(StragglerRank(
            rank=m.ranks[s], score=score, late_share=float(last_in[s] / taken[s]), wait_caused_us=caused,
            cause=_words(part, part_us, m.ranks[s], others, m.ranks, devices), usd=None, cause_part=part,
            cause_us=part_us, last_in=int(last_in[s]), collectives=int(taken[s]), p_value=test.p_value,
            consistent_in=test.counted, consistency_units=test.units, consistency_unit=test.unit))
        waits_us.append(tuple((m.ranks[r], float(w.wait_for_us[r, s] / steps)) for r in others.tolist()))
    order = sorted(range(len(stragglers)), key=lambda i: -stragglers[i].wait_caused_us)
    return Assessment(arrivals=arrivals(m, w, steps, THRESHOLD),
                      stragglers=tuple(stragglers[i] for i in order), waits_us=tuple(waits_us[i] for i in order))


@dataclass(frozen=True)
class _Test:
    p_value: float
    counted: int
    units: int
    unit: Literal["step", "collective"]


def _consistency(m: Matched, w: Waits, s: int, others: npt.NDArray[np.intp], *, steps: int,
                 step_us: float | None, chance: float, ranks: int) -> _Test:
    """Whether the others' wait for rank ``s`` recurs: the units (steps, or collectives where the steps are too
    few to tell a straggler from chance) in which it reaches ``UNIT_SHARE`` of the threshold, against chance."""
    per_collective = w.blamed_us[others].sum(axis=0) / others.size * (w.last == s)
    floor_us = UNIT_SHARE * MIN_SCORE * step_us if step_us else math.inf
    if binomial_tail(steps, steps, chance) < ALPHA / ranks:
        names = [n or "" for n in m.step]
        index = {n: i for i, n in enumerate(dict.fromkeys(names))}
        per_step = np.bincount([index[n] for n in names], weights=per_collective, minlength=len(index))
        counted = min(int((per_step >= floor_us).sum()), steps)
        return _Test(binomial_tail(counted, steps, chance), counted, steps, "step")
    counted = int((per_collective >= floor_us * steps / max(len(m), 1)).sum())
    taken = int(m.present[s].sum())
    return _Test(binomial_tail(counted, taken, chance), counted, taken, "collective")


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
             for i in range(k, n + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def _cause(m: Matched, s: int, mine: npt.NDArray[np.bool_], others: npt.NDArray[np.intp],
           steps: int) -> tuple[str | None, float | None]:
    """The part in which rank ``s`` spent the most more than the others' median before the collectives it reached
    last, and by how much per step; (None, None) when it spent more in none."""
    own = m.leadin_us[s][mine]  # (collectives, parts)
    theirs = m.leadin_us[others][:, mine]  # (others, collectives, parts)
    if not own.size or np.isnan(theirs).all():
        return None, None
    with warnings.catch_warnings():  # a collective with no other rank's lead-in is an all-NaN slice
        warnings.simplefilter("ignore", RuntimeWarning)
        excess = np.nansum(own - np.nanmedian(theirs, axis=0), axis=0) / steps
    best = int(np.argmax(excess))
    return (PARTS[best], float(excess[best])) if excess[best] > 0 else (None, None)


def _words(part: str | None, part_us: float | None, rank: int, others: npt.NDArray[np.intp],
           ranks: Sequence[int], devices: Mapping[int, str | None]) -> str:
    if part is None or part_us is None:
        return "nothing the trace records before those collectives sets it apart from the other ranks"
    text = f"{_CAUSES[part]} (+{_duration(part_us)} per step over the other ranks' median)"
    if part == "kernel":
        mine = devices.get(rank)
        theirs = {devices.get(ranks[r]) for r in others.tolist()} - {None}
        if mine is not None and theirs and mine not in theirs:
            text = f"a slower GPU ({mine}; the others have {', '.join(sorted(str(t) for t in theirs))}): " + text
    return text


def _duration(us: float) -> str:
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"
