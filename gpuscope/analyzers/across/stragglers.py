"""Stragglers from matched collectives: who reaches them last, how long the others wait for that rank, why it is
late, and whether it stands out from chance.

At each matched collective the rank that arrives last holds the others: each other rank waits from its own arrival
to the last one's (at most its own time in the collective: it cannot have waited longer than it spent there). Not
all of that wait is the last rank's doing. A rank's arrival is its release (the end of its previous collective) plus
its lead-in (what it did since), and ranks are not released together: a ring all-reduce over gloo lets its ranks go
one after another, milliseconds apart, and the one let go last arrives last at the next collective with no more work
done. So a rank r's wait for the last rank s is the part of its wait that s's longer lead-in accounts for: at most
s's lead-in less r's (what r would have been spared had s done no more than r since its release). A rank's
``wait_caused_us`` is that wait at the collectives it reached last, summed, averaged over the other ranks and divided
by the steps. It stands out as a straggler when

- it reached last more often than chance allows: if no rank were systematically late, each of a collective's n
  ranks would be last with probability 1/n, so the count is binomial; the rank's chance of being last that often
  or more (``p_value``) must be under ``ALPHA`` shared over the ranks (Bonferroni), and
- the wait matters: ``score``, its wait caused over the job's step time, is ``MIN_SCORE`` or more.

Its cause is the step-breakdown part in which it spent the most more than the others (their median) in the time
before the collectives it reached last.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.across.match import Matched
from gpuscope.analyzers.across.timeline import PARTS
from gpuscope.model.across import Arrivals, CollectiveArrival, RankArrival, StragglerRank

ALPHA = 0.05
MIN_SCORE = 0.05
THRESHOLD = (f"a rank is a straggler when it reaches the collectives last more often than chance allows (binomial "
             f"test, p < {ALPHA:g} shared over the ranks) and the others wait for it at least {MIN_SCORE:.0%} of "
             f"their step")
COLLECTIVES_SHOWN = 64
US_PER_NS = 1e-3
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


@dataclass(frozen=True)
class _Waits:
    last: npt.NDArray[np.intp]
    """Per collective, the row of the rank that reached it last."""
    wait_us: npt.NDArray[np.float64]
    """[rank, collective]: its wait there, from its arrival to the last rank's (at most its time in it)."""
    wait_for_us: npt.NDArray[np.float64]
    """[r, s]: r's wait for s (the part of its wait s's longer lead-in accounts for), summed over the collectives s
    reached last."""


def _waits(m: Matched) -> _Waits:
    present = m.present
    last = np.argmax(np.where(present, m.arrival_ns, -np.inf), axis=0)
    cols = np.arange(len(m))
    with np.errstate(invalid="ignore"):
        wait = np.where(present, np.clip(m.arrival_ns[last, cols][None, :] - m.arrival_ns, 0.0,
                                         np.maximum(m.end_ns - m.arrival_ns, 0.0)), 0.0)
        leadin = m.arrival_ns - m.release_ns
        longer = leadin[last, cols][None, :] - leadin  # the last rank's lead-in less each rank's
        blamed = np.where(present, np.clip(np.minimum(wait, longer), 0.0, None), 0.0)
    onehot = np.zeros((len(m), len(m.ranks)))
    onehot[cols, last] = 1.0
    return _Waits(last=last, wait_us=wait * US_PER_NS, wait_for_us=(blamed * US_PER_NS) @ onehot)


def assess(m: Matched, *, step_us: float | None, steps: int, devices: Mapping[int, str | None]) -> Assessment:
    """Arrivals and stragglers of matched collectives. ``step_us``: the job's step time (the window without
    profiler steps); ``steps``: the steps the collectives came from; ``devices``: each rank's GPU model."""
    steps = max(steps, 1)
    w = _waits(m)
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
        p_value = binomial_tail(int(last_in[s]), int(taken[s]), float(np.mean(1.0 / n_c[present[s]])))
        if p_value >= ALPHA / len(m.ranks) or score < MIN_SCORE:
            continue
        part, part_us = _cause(m, s, w.last == s, others, steps)
        stragglers.append(StragglerRank(
            rank=m.ranks[s], score=score, late_share=float(last_in[s] / taken[s]), wait_caused_us=caused,
            cause=_words(part, part_us, m.ranks[s], others, m.ranks, devices), usd=None, cause_part=part,
            cause_us=part_us, last_in=int(last_in[s]), collectives=int(taken[s]), p_value=p_value))
        waits_us.append(tuple((m.ranks[r], float(w.wait_for_us[r, s] / steps)) for r in others.tolist()))
    order = sorted(range(len(stragglers)), key=lambda i: -stragglers[i].wait_caused_us)
    return Assessment(arrivals=_arrivals(m, w.wait_us, w.last, steps),
                      stragglers=tuple(stragglers[i] for i in order), waits_us=tuple(waits_us[i] for i in order))


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


def _arrivals(m: Matched, waits: npt.NDArray[np.float64], last: npt.NDArray[np.intp], steps: int) -> Arrivals:
    present = m.present
    first_at = np.nanmin(m.arrival_ns, axis=0)
    late = m.arrival_ns - first_at[None, :]
    skew = np.nanmax(m.arrival_ns, axis=0) - first_at
    spread = np.nanmax(m.end_ns, axis=0) - np.nanmin(m.end_ns, axis=0)
    ranks = []
    for r, rank in enumerate(m.ranks):
        n = int(present[r].sum())
        ranks.append(RankArrival(
            rank=rank, late_mean_us=float(np.nanmean(late[r])) * US_PER_NS if n else 0.0,
            last_share=float((last[present[r]] == r).sum() / n) if n else 0.0,
            wait_us=float(waits[r].sum() / steps),
            offset_us=float(m.offsets_ns[r]) * US_PER_NS if n else None))
    return Arrivals(
        matched=len(m), where=m.where, matched_by=m.matched_by, clock=m.clock, steps=steps,
        skew_median_us=float(np.median(skew)) * US_PER_NS, skew_max_us=float(np.max(skew)) * US_PER_NS,
        end_spread_us=float(np.median(spread)) * US_PER_NS, ranks=tuple(ranks),
        collectives=tuple(_collective(m, c, late[:, c], int(last[c])) for c in range(min(len(m), COLLECTIVES_SHOWN))),
        threshold=THRESHOLD)


def _collective(m: Matched, c: int, late: npt.NDArray[np.float64], last: int) -> CollectiveArrival:
    there = np.sort(late[~np.isnan(late)])
    return CollectiveArrival(group=m.group[c], op=m.op[c], seq=m.seq[c], step=m.step[c], ranks=int(there.size),
                             skew_us=float(there[-1] - there[0]) * US_PER_NS, last_rank=m.ranks[last],
                             late_us=float(there[-1] - there[-2]) * US_PER_NS if there.size >= 2 else 0.0)

