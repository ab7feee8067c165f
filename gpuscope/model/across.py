"""Across ranks: the collectives matched between a job's ranks, who reached them last, and what the others' wait
for that rank cost.

Part of the report (schema ``gpuscope.report/1``, field names stable); times are microseconds where the name says
``_us``, shares fractions 0..1, and what cannot be known is None (JSON null), never 0. docs/ranks.md says how each
number is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class StragglerRank:
    """A rank that holds the job back: the others reach their collectives and wait for it."""

    rank: int
    score: float
    """``wait_caused_us`` over the job's step time: the share of each other rank's step spent waiting for this
    one, 0..1."""
    late_share: float
    """Share of the matched collectives it took part in that it reached last."""
    wait_caused_us: float
    """Per step, the mean over the other ranks of their wait for it: at each collective it reached last, a rank's
    time from its own arrival to this rank's (at most its time in the collective)."""
    cause: str
    """What it did in the time before those collectives that the others did not, in words."""
    usd: float | None
    """The others' waiting GPU time over this run, priced; None without a price."""
    cause_part: str | None = None
    """The step-breakdown part (``kernel``, ``dataloader``, ``cpu_exec``, ``runtime``, ``memcpy``, ``memset``,
    ``other``) in which it spent the most more than the others before those collectives; None when none."""
    cause_us: float | None = None
    """Per step, how much more: its time in ``cause_part`` before the collectives it reached last, less the other
    ranks' median time there before the same collectives."""
    last_in: int = 0
    """Matched collectives it reached last."""
    collectives: int = 0
    """Matched collectives it took part in."""
    p_value: float | None = None
    """The chance that a rank no more often late than the others makes them wait in ``consistent_in`` of the
    ``consistency_units`` or more (binomial, each unit's wait falling on any of its ranks alike)."""
    consistent_in: int = 0
    """The steps (or collectives, ``consistency_unit``) in which the others waited for it at least the unit's
    threshold (``Arrivals.threshold`` says which)."""
    consistency_units: int = 0
    """The steps (or collectives) the consistency test is over."""
    consistency_unit: Literal["step", "collective"] = "step"
    """"step" where the job has steps enough for the test to tell a straggler from chance; else "collective"."""


@dataclass(frozen=True)
class RankArrival:
    """One rank at the matched collectives."""

    rank: int
    late_mean_us: float
    """Mean over the matched collectives of its arrival after the first rank's."""
    last_share: float
    """Share of its matched collectives it reached last."""
    wait_us: float
    """Per step, its own wait in the matched collectives: from its arrival to the last rank's (at most its time in
    the collective)."""
    offset_us: float | None = None
    """What was taken off its clock to align it with the others (0 on a shared clock); None when it took part in
    no matched collective."""


@dataclass(frozen=True)
class RankWait:
    """How long one rank waited for another at a collective."""

    rank: int
    wait_us: float


@dataclass(frozen=True)
class CollectiveArrival:
    """One matched collective: how far apart the ranks reached it, and who came last."""

    group: str
    """The process group's name where the trace records it, else ""."""
    op: str
    """all_reduce, all_gather, ..., or the kernel's or op's own name."""
    seq: int | None
    """The collective's sequence number in its group where recorded; None when matched by order."""
    step: str | None
    """The profiler step it ran in (matching by order is within a step); None without profiler steps."""
    ranks: int
    skew_us: float
    """The last rank's arrival less the first's."""
    last_rank: int
    late_us: float
    """How long after the next-to-last rank the last one arrived."""
    nth: int | None = None
    """Its sequence number where recorded (``seq``), else its number among the same op of its group and stream in
    ``step``, from 1."""
    wait_caused_us: float = 0.0
    """Mean over the other ranks there of their wait for ``last_rank``: from their arrival to its, at most their
    time in the collective and at most its longer lead-in (docs/ranks.md section 3)."""
    waits: tuple[RankWait, ...] = ()
    """The ranks that waited for ``last_rank`` there and for how long, longest first (at most ``WAITS_SHOWN``)."""
    waiting_ranks: int = 0
    """How many ranks waited for it there (``waits`` may list fewer)."""


@dataclass(frozen=True)
class Arrivals:
    """How the ranks' collectives were matched, and who reached them when."""

    matched: int
    """Collectives matched on two or more ranks."""
    where: Literal["gpu", "host"]
    """"gpu": NCCL/RCCL kernels (arrival = the kernel's start on the GPU); "host": gloo ops on the CPU (arrival =
    the op's start on the process group's worker thread)."""
    matched_by: Literal["seq", "order"]
    """"seq": by process group and sequence number, as the trace records them; "order": by order within each
    (profiler step, process group, stream, op)."""
    clock: Literal["shared", "estimated"]
    """"shared": every rank's trace came from one host, whose clock they share; "estimated": each rank's clock
    offset was estimated from the collectives' ends (they finish together on every rank)."""
    steps: int
    """Steps the per-step figures are over (1 for a trace without profiler steps: its window)."""
    skew_median_us: float
    skew_max_us: float
    end_spread_us: float
    """Median over the collectives of the spread of their ends across ranks, after the offsets: how well the
    clocks line up (a few µs on one host)."""
    ranks: tuple[RankArrival, ...] = ()
    collectives: tuple[CollectiveArrival, ...] = ()
    """The first matched collectives (at most ``COLLECTIVES_SHOWN``), in time order."""
    threshold: str = ""
    """When a rank counts as a straggler, in words."""
    worst: tuple[CollectiveArrival, ...] = ()
    """The collectives at which the others waited longest for the last rank (at most ``WORST_SHOWN``, longest
    first, only those with a wait)."""
    clock_note: str = ""
    """Why the clocks were estimated although the traces name one host (their ends lie too far apart for one
    clock); "" otherwise."""
