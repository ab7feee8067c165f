"""GPU-side time of a rank: busy share, Holistic Trace Analysis' temporal and idle-time breakdowns (with the GPU-side
wait as a cause of its own)."""

from __future__ import annotations

import numpy as np

from gpuscope.analyzers.trace import queue
from gpuscope.analyzers.trace.breakdown import Roles
from gpuscope.analyzers.trace.intervals import Intervals, clip, subtract
from gpuscope.analyzers.trace.queue import KERNEL_WAIT_NS
from gpuscope.analyzers.trace.steps import launched_gpu_events
from gpuscope.model.rank import IdleBreakdown, Temporal
from gpuscope.model.trace import GPU_KINDS, RankTrace


def busy_share(r: Roles, start_ns: int, end_ns: int) -> float | None:
    """|union of kernel, memcpy and memset intervals| / window; None when the trace has no GPU work."""
    if len(r.gpu_any) == 0 or end_ns <= start_ns:
        return None
    return clip(r.gpu_any, start_ns, end_ns).total / (end_ns - start_ns)


def temporal(r: Roles, start_ns: int, end_ns: int) -> Temporal | None:
    """Idle, compute and non-compute time over the window (communication hidden under compute is compute)."""
    if len(r.gpu_any) == 0 or end_ns <= start_ns:
        return None
    window = end_ns - start_ns
    busy = clip(r.gpu_any, start_ns, end_ns).total
    compute = clip(r.kernel, start_ns, end_ns).total
    return Temporal(idle_us=(window - busy) / 1000, compute_us=compute / 1000,
                    non_compute_us=(busy - compute) / 1000)


def idle_breakdown(trace: RankTrace, r: Roles, start_ns: int, end_ns: int) -> IdleBreakdown | None:
    """Split each gap in the rank's GPU activity by what it was waiting for.

    GPU-side wait first (``queue``): the gap's time with launched work queued, when that is 100 µs or more, or the
    whole gap (100 µs or more) when no recorded call launched the work that closes it and the host recorded nothing
    meanwhile. The
    rest of the gap by HTA's rules, on the GPU event that closes it: host wait when its launch call started after
    the gap opened (the host was late); kernel wait when the host had launched it and the gap is under 30 µs;
    other for the rest (a longer gap after launch without work queued in it, a gap no GPU event closes).
    """
    if len(r.gpu_any) == 0 or end_ns <= start_ns:
        return None
    busy = clip(r.gpu_any, start_ns, end_ns)
    gaps = subtract(Intervals(np.array([start_ns]), np.array([end_ns])), busy)
    if len(gaps) == 0:
        return IdleBreakdown(0.0, 0.0, 0.0, gpu_side_wait=0.0)
    side = queue.side_wait_in(trace, gaps).per_gap_ns
    ev = trace.events
    gpu_idx = np.flatnonzero(ev.mask(*GPU_KINDS))
    launch_start = np.full(len(ev), np.iinfo(np.int64).max, dtype=np.int64)
    rt, dev = launched_gpu_events(trace)
    launch_start[dev] = ev.ts_ns[rt]
    # The GPU event that closes each gap: the first one starting at or after the gap's end.
    nxt = np.searchsorted(ev.ts_ns[gpu_idx], gaps.ends, side="left")
    has_next = nxt < gpu_idx.size
    length = gaps.ends - gaps.starts
    rest = length - side
    host_wait = np.zeros(len(gaps), dtype=bool)
    known = np.zeros(len(gaps), dtype=bool)
    launch = launch_start[gpu_idx[nxt[has_next]]]
    known[has_next] = launch != np.iinfo(np.int64).max
    host_wait[has_next] = known[has_next] & (launch > gaps.starts[has_next])
    kernel_wait = known & ~host_wait & (length < KERNEL_WAIT_NS)
    other = ~host_wait & ~kernel_wait
    return IdleBreakdown(host_wait=float(rest[host_wait].sum()) / 1000,
                         kernel_wait=float(rest[kernel_wait].sum()) / 1000,
                         other=float(rest[other].sum()) / 1000,
                         gpu_side_wait=float(side.sum()) / 1000)
