"""The arrivals part of the report: per rank how late it comes and how long it waits, per collective who came last
and whom that made wait, and the collectives where the others waited longest."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.across.match import Matched, end_spread_ns
from gpuscope.analyzers.across.waits import US_PER_NS, Waits
from gpuscope.model.across import Arrivals, CollectiveArrival, RankArrival, RankWait

COLLECTIVES_SHOWN = 64
WORST_SHOWN = 8
WAITS_SHOWN = 16


def arrivals(m: Matched, w: Waits, steps: int, threshold: str) -> Arrivals:
    """How the collectives were matched and who reached them when; per-step figures over ``steps``."""
    present = m.present
    first_at = np.nanmin(m.arrival_ns, axis=0)
    late = m.arrival_ns - first_at[None, :]
    skew = np.nanmax(m.arrival_ns, axis=0) - first_at
    ranks = []
    for r, rank in enumerate(m.ranks):
        n = int(present[r].sum())
        ranks.append(RankArrival(
            rank=rank, late_mean_us=float(np.nanmean(late[r])) * US_PER_NS if n else 0.0,
            last_share=float((w.last[present[r]] == r).sum() / n) if n else 0.0,
            wait_us=float(w.wait_us[r].sum() / steps),
            offset_us=float(m.offsets_ns[r]) * US_PER_NS if n else None))
    caused = _caused_us(m, w)
    worst = [int(c) for c in np.argsort(-caused, kind="stable")[:WORST_SHOWN].tolist() if caused[c] > 0]
    return Arrivals(
        matched=len(m), where=m.where, matched_by=m.matched_by, clock=m.clock, steps=steps,
        skew_median_us=float(np.median(skew)) * US_PER_NS, skew_max_us=float(np.max(skew)) * US_PER_NS,
        end_spread_us=end_spread_ns(m.end_ns) * US_PER_NS, ranks=tuple(ranks),
        collectives=tuple(_collective(m, w, c, late[:, c], float(caused[c]))
                          for c in range(min(len(m), COLLECTIVES_SHOWN))),
        threshold=threshold, worst=tuple(_collective(m, w, c, late[:, c], float(caused[c])) for c in worst),
        clock_note=m.clock_note)


def _caused_us(m: Matched, w: Waits) -> npt.NDArray[np.float64]:
    """Per collective, the mean over the other ranks there of their wait for the last one."""
    others = m.present.sum(axis=0) - 1
    return np.where(others > 0, w.blamed_us.sum(axis=0) / np.maximum(others, 1), 0.0)


def _collective(m: Matched, w: Waits, c: int, late: npt.NDArray[np.float64], caused_us: float) -> CollectiveArrival:
    there = np.sort(late[~np.isnan(late)])
    last = int(w.last[c])
    blamed = w.blamed_us[:, c]
    waiting = [r for r in np.argsort(-blamed, kind="stable").tolist() if r != last and blamed[r] > 0]
    return CollectiveArrival(
        group=m.group[c], op=m.op[c], seq=m.seq[c], step=m.step[c], ranks=int(there.size),
        skew_us=float(there[-1] - there[0]) * US_PER_NS, last_rank=m.ranks[last],
        late_us=float(there[-1] - there[-2]) * US_PER_NS if there.size >= 2 else 0.0,
        nth=m.nth[c] if m.nth else None, wait_caused_us=caused_us,
        waits=tuple(RankWait(rank=m.ranks[r], wait_us=float(blamed[r])) for r in waiting[:WAITS_SHOWN]),
        waiting_ranks=len(waiting))
