"""The ranks' collectives matched with each other, on one clock.

Matching: by (process group, sequence number) where every rank's trace records them (PyTorch's comms metadata);
otherwise the k-th collective of a (profiler step, process group, stream, op) on one rank is the k-th on every
other rank that has it. Ranks keep the same program order for collectives of one group (NCCL and gloo require it),
and counting within a step keeps a trace window that starts or ends mid-step on one rank from shifting every match.
Streams are numbered per rank by first use, so ranks need not share stream ids.

Clocks: ranks whose traces name one host share its clock, as a hint and not as proof: a trace's host name can be
the same on every node of a cluster (a container's), and a rank's clock can be set wrong. When the collectives'
ends, which are one moment on every rank, lie further apart than one clock allows (``SHARED_CLOCK_END_SPREAD_NS``),
or the traces name no common host, each rank's offset is estimated from those ends (a collective completes once its
last rank has joined): the offset is the median over its collectives of how far its ends lie from the collective's
median end, twice over.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.across.timeline import PARTS, CollectiveTimeline

F64 = npt.NDArray[np.float64]
SHARED_CLOCK_END_SPREAD_NS = 1_000_000_000
"""On one clock a collective's ends lie within a few µs (NCCL) or ms (a gloo ring) of each other; a median spread
over 1 s means the ranks' clocks differ, whatever host name the traces give."""


@dataclass(frozen=True)
class Matched:
    """Matched collectives as rank x collective matrices (NaN where a rank has no part in it), on one clock in ns
    from the earliest arrival."""

    ranks: tuple[int, ...]
    arrival_ns: F64
    end_ns: F64
    release_ns: F64
    """Where each rank's lead-in to the collective starts (``CollectiveTimeline.release_ns``)."""
    leadin_us: F64
    """(ranks, collectives, len(PARTS))."""
    group: tuple[str, ...]
    op: tuple[str, ...]
    seq: tuple[int | None, ...]
    step: tuple[str | None, ...]
    offsets_ns: F64
    """Per rank, what was taken off its clock."""
    where: Literal["gpu", "host"]
    matched_by: Literal["seq", "order"]
    clock: Literal["shared", "estimated"]
    nth: tuple[int, ...] = ()
    """Per collective, its number among the same (step, group, stream, op) on its rank, from 1 (matching by order);
    the sequence number is in ``seq`` where recorded."""
    clock_note: str = ""
    """Why the clocks were estimated although the traces name one host; "" otherwise."""

    @property
    def present(self) -> npt.NDArray[np.bool_]:
        return ~np.isnan(self.arrival_ns)

    def __len__(self) -> int:
        return int(self.arrival_ns.shape[1])


def match(timelines: Sequence[CollectiveTimeline], steps: set[str] | None = None) -> Matched | None:
    """The collectives two or more ranks share; None when there are none. ``steps``: the job's steady step names
    (collectives of other steps left out); None keeps every step."""
    lines = [t for t in timelines if len(t)]
    wheres = {t.where for t in lines}
    if len(lines) < 2 or len(wheres) != 1:
        return None
    by_seq = all(bool((t.seq >= 0).all()) for t in lines)
    columns: dict[tuple[object, ...], int] = {}
    cells: list[tuple[int, int, int]] = []  # (rank row, column, index in the rank's timeline)
    nths: dict[int, int] = {}
    for row, t in enumerate(lines):
        seen: dict[tuple[str, str], int] = {}
        for i in np.argsort(t.arrival_ns, kind="stable").tolist():
            if steps is not None and t.step[i] and t.step[i] not in steps:
                continue
            if by_seq:
                key: tuple[object, ...] = (t.group[i], int(t.seq[i]))
                number = int(t.seq[i])
            else:
                nth = seen.get((t.step[i], t.keys[i]), 0)
                seen[(t.step[i], t.keys[i])] = nth + 1
                key = (t.step[i], t.keys[i], nth)
                number = nth + 1
            column = columns.setdefault(key, len(columns))
            nths.setdefault(column, number)
            cells.append((row, column, i))
    counts = np.bincount([c for _, c, _ in cells], minlength=len(columns))
    shared = counts >= 2
    if not shared.any():
        return None
    return _matrices(lines, nths, cells, shared, by_seq)


def _matrices(lines: Sequence[CollectiveTimeline], nths: dict[int, int],
              cells: list[tuple[int, int, int]], shared: npt.NDArray[np.bool_], by_seq: bool) -> Matched:
    new_col = np.cumsum(shared) - 1
    k, r = int(shared.sum()), len(lines)
    base = min(int(t.arrival_ns.min()) for t in lines)
    arrival = np.full((r, k), np.nan)
    end = np.full((r, k), np.nan)
    release = np.full((r, k), np.nan)
    leadin = np.full((r, k, len(PARTS)), np.nan)
    first: dict[int, tuple[int, int]] = {}
    nth = np.zeros(k, np.int64)
    for row, col, i in cells:
        if not shared[col]:
            continue
        c = int(new_col[col])
        nth[c] = nths[col]
        t = lines[row]
        arrival[row, c] = float(int(t.arrival_ns[i]) - base)
        end[row, c] = float(int(t.end_ns[i]) - base)
        release[row, c] = float(int(t.release_ns[i]) - base)
        leadin[row, c] = t.leadin_us[i]
        first.setdefault(c, (row, i))
    clock, note = _clock(lines, end)
    offsets = np.zeros(r) if clock == "shared" else _offsets(end)
    for times in (arrival, end, release):
        times -= offsets[:, None]
    order = np.argsort(np.nanmin(arrival, axis=0), kind="stable")
    described = [first[int(c)] for c in order.tolist()]
    return Matched(
        ranks=tuple(t.rank for t in lines), arrival_ns=arrival[:, order], end_ns=end[:, order],
        release_ns=release[:, order], leadin_us=leadin[:, order],
        group=tuple(lines[row].group[i] for row, i in described),
        op=tuple(lines[row].keys[i].split("|")[1] for row, i in described),
        seq=tuple(int(lines[row].seq[i]) if by_seq else None for row, i in described),
        step=tuple(lines[row].step[i] or None for row, i in described), offsets_ns=offsets,
        where=lines[0].where, matched_by="seq" if by_seq else "order", clock=clock,
        nth=tuple(int(n) for n in nth[order].tolist()), clock_note=note)


def _clock(lines: Sequence[CollectiveTimeline], end: F64) -> tuple[Literal["shared", "estimated"], str]:
    """"shared" when the traces name one host and the collectives' ends agree as one clock allows; else
    "estimated", with the reason when a shared host name was overruled."""
    hosts = {t.host_name for t in lines}
    if len(hosts) != 1 or None in hosts or not all(t.epoch_clock for t in lines):
        return "estimated", ""
    spread = end_spread_ns(end)
    if spread <= SHARED_CLOCK_END_SPREAD_NS:
        return "shared", ""
    return "estimated", (f"the traces name one host, but the collectives' ends lie {spread / 1e9:,.1f} s apart "
                         f"(median), more than one clock allows ({SHARED_CLOCK_END_SPREAD_NS / 1e9:g} s): each "
                         "rank's clock offset was estimated as for separate hosts")


def end_spread_ns(end: F64) -> float:
    """The median over the collectives of the spread of their ends across ranks."""
    with warnings.catch_warnings():  # a collective on one rank only has no spread
        warnings.simplefilter("ignore", RuntimeWarning)
        spread = np.nanmax(end, axis=0) - np.nanmin(end, axis=0)
    return float(np.nanmedian(spread)) if spread.size and not np.isnan(spread).all() else 0.0


def _offsets(end: F64) -> F64:
    """Each rank's clock offset from the consensus of collective ends (see the module docstring)."""
    offsets = np.zeros(end.shape[0])
    for _ in range(2):
        aligned = end - offsets[:, None]
        centre = np.nanmedian(aligned, axis=0)
        with warnings.catch_warnings():  # a rank that shares no collective has no offset to find
            warnings.simplefilter("ignore", RuntimeWarning)
            step = np.nanmedian(aligned - centre[None, :], axis=1)
        offsets += np.nan_to_num(step)
    return offsets - np.median(offsets)
