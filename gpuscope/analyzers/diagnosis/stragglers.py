"""Stragglers from durations alone: the rank the others wait for in their collectives, where the ranks'
collectives could not be matched with each other (``gpuscope.analyzers.across`` matches them, and its worst
straggler takes this one's place in the diagnosis).

A collective ends on every rank at about the same moment, when the last rank has joined. A rank
that joins early sits inside the NCCL kernel until then, so its time in communication kernels grows
by its wait. The rank with the least communication-kernel time per step is therefore the one the
others wait for, and each other rank's excess over it is its wait. This reads only durations, so it
holds even when the ranks' clocks are not aligned (Holistic Trace Analysis compares kernel durations
the same way, but only for names starting with ``ncclKernel`` and so misses ``ncclDevKernel_*``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuscope.model.rank import RankReport

MIN_WAIT_SHARE = 0.05
"""Waits under 5% of the waiting ranks' step are noise, not a straggler."""


@dataclass(frozen=True)
class Straggler:
    """The rank the others wait for, and how long they wait (per step)."""

    rank: int
    comm_us: float
    """The straggler's own time in communication kernels per step."""
    wait_us: tuple[tuple[int, float], ...]
    """(rank, µs per step spent waiting for the straggler), every rank but the straggler."""
    mean_wait_us: float
    max_wait_rank: int
    max_wait_us: float
    mean_wait_share: float
    """Mean over all ranks (the straggler counts 0) of wait / that rank's step."""
    late_share: float | None = None
    """Share of the matched collectives it reached last, where arrivals were matched across ranks
    (``gpuscope.analyzers.across``); None for a straggler found from durations alone."""
    cause: str = ""
    """What it did before the collectives that the others did not, where arrivals were matched."""


def per_step_comm_us(r: RankReport) -> float:
    return r.communication.total_us / max(r.steps, 1)


def find_straggler(ranks: Sequence[RankReport]) -> Straggler | None:
    """The straggler of a multi-rank job, or None when ranks are balanced or there are no collectives."""
    ranks = [r for r in ranks if r.communication.total_us > 0 and r.span_us > 0]
    if len(ranks) < 2:
        return None
    comm = {r.rank: per_step_comm_us(r) for r in ranks}
    slow = min(comm, key=lambda k: comm[k])
    waits = tuple((r.rank, comm[r.rank] - comm[slow]) for r in ranks if r.rank != slow)
    shares = [w / r.span_us for (_, w), r in zip(waits, (r for r in ranks if r.rank != slow))]
    mean_share = sum(shares) / len(ranks)
    if mean_share < MIN_WAIT_SHARE:
        return None
    worst = max(waits, key=lambda x: x[1])
    return Straggler(rank=slow, comm_us=comm[slow], wait_us=waits,
                     mean_wait_us=sum(w for _, w in waits) / len(waits), max_wait_rank=worst[0],
                     max_wait_us=worst[1], mean_wait_share=mean_share)
