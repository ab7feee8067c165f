"""One rank's collectives, reduced where the rank is read: when it reached each one, when it left it, and what it
did in the time before it.

A collective's work is its NCCL/RCCL kernel on the GPU (arrival = the kernel's start, when the GPU reached it) or,
on a rank without communication kernels, its gloo op on the CPU (``gloo:all_reduce`` on the process group's worker
thread: arrival = when the worker began it). The time before a collective (its lead-in) runs from the end of the
rank's previous collective (its release), or for its first one the start of its step, to the arrival; it is split
with the step breakdown's parts and priority (``breakdown.step_breakdowns``), so the parts say whether the rank
was computing on the GPU, loading data, running host ops, or doing something no profiled event covers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace import breakdown
from gpuscope.analyzers.trace.collectives import op_kind
from gpuscope.analyzers.trace.startup import StepPlan
from gpuscope.analyzers.trace.steps import Steps
from gpuscope.model.trace import Kind, RankTrace

PARTS = ("kernel", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other")
"""The step-breakdown parts a lead-in is split into (communication left out: the previous collectives' own time)."""
MAX_COLLECTIVES = 1024
"""Collectives kept per rank (whole steps, from the first steady one): enough for the statistics, and a thousand
ranks' timelines stay some tens of MB in the process that builds the report."""
HOST_PREFIXES = ("gloo:",)
"""Host ops that are a collective's own work (the gloo worker runs it): ``nccl:*`` host ops only enqueue a kernel."""


@dataclass(frozen=True, eq=False)
class CollectiveTimeline:
    """A rank's collectives in its steady steps, in arrival order (parallel arrays)."""

    rank: int
    where: Literal["gpu", "host"]
    host_name: str | None
    epoch_clock: bool
    """The times are epoch nanoseconds (the trace's base time known): ranks of one host can be compared as they are."""
    steps: int
    """Steady steps the collectives were taken from (1 without profiler steps)."""
    keys: tuple[str, ...]
    """Each collective's order key: process group, op and the rank's own number for its stream (by first use)."""
    step: tuple[str, ...]
    """The profiler step each ran in ("" without profiler steps)."""
    seq: npt.NDArray[np.int64]
    """The collective's sequence number in its group (-1 where the trace does not say)."""
    group: tuple[str, ...]
    arrival_ns: npt.NDArray[np.int64]
    end_ns: npt.NDArray[np.int64]
    release_ns: npt.NDArray[np.int64]
    """Where each collective's lead-in starts: the end of the rank's previous collective (its first one's: its
    step's start)."""
    leadin_us: npt.NDArray[np.float32]
    """(collectives, len(PARTS)): the time before each collective by part."""
    truncated: bool = False
    """More collectives than ``MAX_COLLECTIVES``: only the first steps' are kept."""

    def __len__(self) -> int:
        return int(self.arrival_ns.shape[0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CollectiveTimeline):
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))

    def renumbered(self, rank: int) -> CollectiveTimeline:
        return replace(self, rank=rank)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and bool(np.array_equal(a, b))
    return bool(a == b)


@dataclass(frozen=True)
class _Picked:
    index: npt.NDArray[np.intp]
    where: Literal["gpu", "host"]
    op: list[str] = field(default_factory=list)
    slot: list[int] = field(default_factory=list)


def collective_timeline(trace: RankTrace, plan: StepPlan, roles: breakdown.Roles) -> CollectiveTimeline | None:
    """The rank's collectives in its steady steps; None when it ran none there."""
    steady = plan.steady
    if steady is None or not len(steady):
        return None
    picked = _pick(trace, roles)
    if picked is None:
        return None
    ev = trace.events
    idx = picked.index
    step_of = np.searchsorted(steady.starts_ns, ev.ts_ns[idx], side="right") - 1
    inside = step_of >= 0
    inside[inside] = ev.ts_ns[idx[inside]] < steady.ends_ns[step_of[inside]]
    keep = np.flatnonzero(inside)
    truncated = keep.size > MAX_COLLECTIVES
    if truncated:
        last_step = step_of[keep[MAX_COLLECTIVES - 1]]
        keep = keep[step_of[keep] < max(last_step, step_of[keep[0]] + 1)][:MAX_COLLECTIVES]
    if keep.size == 0:
        return None
    idx, step_of = idx[keep], step_of[keep]
    group, seq = _group_and_seq(trace, idx)
    arrival, end = ev.ts_ns[idx], ev.end_ns[idx]
    release = _releases(steady.starts_ns[step_of[0]], arrival, end)
    offset = _epoch_offset(trace)
    names = steady.names if steady.from_profiler else ("",) * len(steady)
    return CollectiveTimeline(
        rank=trace.rank, where=picked.where, host_name=trace.host_name, epoch_clock=offset is not None,
        steps=int(np.unique(step_of).size) if truncated else len(steady),
        keys=tuple(f"{g}|{picked.op[i]}|{picked.slot[i]}" for g, i in zip(group, keep.tolist())),
        step=tuple(names[s] for s in step_of.tolist()), seq=seq, group=group,
        arrival_ns=arrival + (offset or 0), end_ns=end + (offset or 0), release_ns=release + (offset or 0),
        leadin_us=_leadins(roles, release, arrival), truncated=truncated)


def _pick(trace: RankTrace, roles: breakdown.Roles) -> _Picked | None:
    """Communication kernels in time order, each with its op and its stream's slot; else gloo's host ops."""
    ev = trace.events
    kernels = np.flatnonzero(roles.comm_kernel_mask & (ev.kind == Kind.KERNEL))
    if kernels.size:
        slots: dict[int, int] = {}
        return _Picked(kernels, "gpu", [_op(trace.names[n]) for n in ev.name_id[kernels].tolist()],
                       [slots.setdefault(s, len(slots)) for s in ev.stream[kernels].tolist()])
    host = np.flatnonzero(trace.name_mask(lambda n: n.startswith(HOST_PREFIXES), Kind.USER_ANNOTATION, Kind.CPU_OP))
    if not host.size:
        return None
    ops = [_op(trace.names[n].split(":", 1)[1]) for n in ev.name_id[host].tolist()]
    return _Picked(host, "host", ops, [0] * host.size)


def _op(name: str) -> str:
    """The collective a kernel or op name stands for; the name itself (cut short) when it says none."""
    return op_kind(name) or name[:80]


def _group_and_seq(trace: RankTrace, idx: npt.NDArray[np.intp]) -> tuple[tuple[str, ...], npt.NDArray[np.int64]]:
    """Each event's process group and sequence number, from the comms metadata PyTorch records on it or on the host
    op that launched it (the same External id); "" and -1 where none says."""
    ops = trace.collectives
    seq = np.full(idx.size, -1, dtype=np.int64)
    if not len(ops) or not (ops.seq >= 0).any() and not any(ops.group):
        return ("",) * idx.size, seq
    known = {int(e): (g, int(s)) for e, g, s in zip(ops.external_id.tolist(), ops.group, ops.seq.tolist())
             if e >= 0 and (g or s >= 0)}
    groups = []
    for i, ext in enumerate(trace.events.external_id[idx].tolist()):
        g, s = known.get(ext, ("", -1))
        groups.append(g)
        seq[i] = s
    return tuple(groups), seq


def _epoch_offset(trace: RankTrace) -> int | None:
    """What makes the event times epoch times; None when the trace does not say (``RankTrace.epoch_offset_ns``)."""
    return trace.epoch_offset_ns


def _releases(first_start_ns: int, arrival: npt.NDArray[np.int64],
              end: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each collective's lead-in start (``arrival`` is in time order): the latest end of an earlier collective that
    ended before it began (the first one's: ``first_start_ns``, its step's start), and never before the previous
    collective's arrival, so that lead-ins do not overlap."""
    n = arrival.size
    release = np.empty(n, np.int64)
    latest_end, prev_arrival = first_start_ns, first_start_ns
    for i in range(n):
        a = int(arrival[i])
        release[i] = min(max(latest_end if latest_end <= a else prev_arrival, prev_arrival), a)
        latest_end, prev_arrival = max(latest_end, int(end[i])), a
    return release


def _leadins(roles: breakdown.Roles, release: npt.NDArray[np.int64],
             arrival: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """Each collective's lead-in (release to arrival) split by part, with the step breakdown's priority."""
    parts = breakdown.step_breakdowns(roles, Steps(("",) * arrival.size, release, arrival.copy()))
    return np.array([[getattr(part, p) for p in PARTS] for part in parts], dtype=np.float32).reshape(-1, len(PARTS))
