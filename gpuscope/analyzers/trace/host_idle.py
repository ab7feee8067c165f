"""Where the host is while the GPU waits: the named host ranges that cover the most GPU idle time.

"Host overhead" says the GPU waits for the host; this says for what. Over the steady window, the GPU's idle
time is the window less every kernel, copy and set, and less the GPU-side wait (``queue``: work already launched
sat queued, or nothing on the host launched it), which no host range is to blame for. Each operator or
``record_function`` annotation name (the profiler steps and the DataLoader's ranges left out: those are steps and
data loading, not host work) is scored by how much of that idle time falls inside its ranges (the ranges of one
name merged first, so a name that nests in itself counts once). Ranges of different names nest (``## optimizer
##`` around ``Optimizer.step#Adam.step`` around ``aten::_foreach_add_``), so the scores of nested names overlap:
each says how much of the GPU's wait the host spent inside that range, not an exclusive part of it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace import classify
from gpuscope.analyzers.trace.breakdown import Roles
from gpuscope.analyzers.trace.intervals import Intervals, intersect, merge, subtract
from gpuscope.analyzers.trace.queue import gpu_side_wait
from gpuscope.model.rank import HostWait
from gpuscope.model.trace import Kind, RankTrace

TOP = 3
CANDIDATES = 12
"""Names scored exactly: those whose summed (unmerged) idle overlap is largest, an upper bound of the exact one."""


def host_in_gpu_idle(trace: RankTrace, roles: Roles, start_ns: int, end_ns: int, *,
                     top: int = TOP) -> tuple[HostWait, ...]:
    """The ``top`` host range names by GPU idle time (the GPU-side wait left out) inside them over
    [start_ns, end_ns), most first."""
    if end_ns <= start_ns:
        return ()
    window = Intervals(np.array([start_ns], np.int64), np.array([end_ns], np.int64))
    idle = subtract(subtract(window, roles.gpu_any), gpu_side_wait(trace, roles.gpu_any, start_ns, end_ns))
    idle_ns = idle.total
    ev = trace.events
    named = ev.mask(Kind.CPU_OP, Kind.USER_ANNOTATION) & (ev.ts_ns < end_ns) & (ev.end_ns > start_ns)
    named &= ~trace.name_mask(classify.is_dataloader_op, Kind.CPU_OP, Kind.USER_ANNOTATION)
    rows = np.flatnonzero(named)
    if idle_ns <= 0 or rows.size == 0:
        return ()
    bound = _idle_inside(idle, ev.ts_ns[rows], ev.end_ns[rows])
    by_name = np.bincount(ev.name_id[rows], weights=bound.astype(np.float64), minlength=len(trace.names))
    scored: list[tuple[int, int]] = []
    for name_id in np.argsort(-by_name, kind="stable")[:CANDIDATES].tolist():
        if by_name[name_id] <= 0:
            break
        mine = rows[ev.name_id[rows] == name_id]
        scored.append((intersect(merge(ev.ts_ns[mine], ev.end_ns[mine]), idle).total, name_id))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return tuple(HostWait(name=trace.names[i], idle_us=ns / 1000, share=ns / idle_ns) for ns, i in scored[:top]
                 if ns > 0)


def _idle_inside(idle: Intervals, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For each [start, end): the idle time inside it, from the idle time before each point (a running sum)."""
    before = np.concatenate(([0], np.cumsum(idle.ends - idle.starts)))
    return _idle_before(idle, before, ends) - _idle_before(idle, before, starts)


def _idle_before(idle: Intervals, before: npt.NDArray[np.int64], t: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    j = np.searchsorted(idle.starts, t, side="right")  # idle intervals starting at or before t
    out = before[j].copy()
    inside = j > 0
    k = j[inside] - 1
    out[inside] -= np.maximum(idle.ends[k] - t[inside], 0)  # the part of the last one after t
    return out
