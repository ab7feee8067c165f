"""Work handed to the GPU and not yet started: launch-to-start latency, queue depth per stream, the GPU-side wait.

As Holistic Trace Analysis computes the first two:

- launch-to-start latency (HTA's "launch delay"): a kernel's start less the end of the runtime call that launched
  it, the two joined on the correlation id, never below 0 (a kernel may start before its call returns);
- queue depth of a stream: one up when a runtime call launches work onto the stream (at the call's start), one down
  when that work starts on the GPU; HTA's summary is taken over the values the series takes, one per change.

Unlike HTA, every runtime call joined to GPU work counts as a launch, graph replays (``cudaGraphLaunch``,
``hipGraphLaunch``) included: each kernel a replay runs is queued from the replay's call.

The GPU-side wait is GPU idle time (no kernel, copy or set on the rank) that the host cannot have caused: within a
gap in the GPU's work, the time some work was queued (its launch call had returned, the work had not started) when
that adds up to 100 µs or more (``QUEUED_MIN_NS``: less is the time a launch takes on an idle GPU); and the
whole of a gap of 100 µs or more closed by GPU work that no recorded call launched while the host recorded nothing
at all during it (work launched outside the trace). Both are waits on the GPU's side: queued behind work the trace
does not show, another process on the GPU, a stream waiting for an event, or work from before the profiler started.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace import classify
from gpuscope.analyzers.trace.intervals import Intervals, clip, intersect, merge, subtract, union
from gpuscope.analyzers.trace.steps import launched_gpu_events
from gpuscope.model.rank import FillingCall, LaunchLatency, LaunchQueue, StreamQueue
from gpuscope.model.trace import CPU_KINDS, GPU_KINDS, Events, Kind, RankTrace

I64 = npt.NDArray[np.int64]
KERNEL_WAIT_NS = 30_000
"""HTA: a gap under 30 µs after work was launched is the GPU's own turnaround, not a wait."""
QUEUED_MIN_NS = 100_000
"""Work queued for 100 µs or more of one gap is a GPU-side wait: longer than a launch takes (a kernel starts some 5
to 40 µs after its call returns on an idle GPU; V100 traces show 30-33 µs for the first kernel after a pause)."""
MAX_STREAMS = 16
"""Streams listed per rank (those with the most launches): a rank drives a handful; a view stays bounded."""
FILLS_MIN = 0.5
"""A single runtime call holding at least this share of the steady window, while the GPU is busy under this share
of the call, is named as filling it."""
_STREAMS = 2**32


def kernel_latency_ns(trace: RankTrace) -> tuple[I64, npt.NDArray[np.bool_]]:
    """Each launched kernel's launch-to-start latency (ns, clipped at 0), and whether a graph replay launched it."""
    ev = trace.events
    rt, dev = launched_gpu_events(trace)
    kernel = ev.kind[dev] == Kind.KERNEL
    rt, dev = rt[kernel], dev[kernel]
    graph = trace.name_mask(classify.is_graph_launch, Kind.RUNTIME)[rt]
    return np.maximum(ev.ts_ns[dev] - ev.end_ns[rt], 0), graph


def launch_queue(trace: RankTrace) -> LaunchQueue | None:
    """Launch-to-start latency of the rank's kernels and queue depth of its streams; None without launched work."""
    latency_ns, graph = kernel_latency_ns(trace)
    streams, total = stream_queues(trace)
    if latency_ns.size == 0 and not streams:
        return None
    return LaunchQueue(latency=latency_stats(latency_ns, graph), streams=streams[:MAX_STREAMS],
                       streams_left_out=max(total - MAX_STREAMS, 0))


def latency_stats(latency_ns: I64, graph: npt.NDArray[np.bool_]) -> LaunchLatency | None:
    if latency_ns.size == 0:
        return None
    us = latency_ns / 1000.0
    p50, p90, p99 = np.percentile(us, [50, 90, 99]).tolist()
    return LaunchLatency(kernels=int(us.size), graph_kernels=int(graph.sum()), mean_us=float(us.mean()),
                         p50_us=float(p50), p90_us=float(p90), p99_us=float(p99), max_us=float(us.max()))


class _Series(NamedTuple):
    key: I64
    """The stream of each change: device x 2**32 + stream + 2**31 (streams are int32)."""
    ts_ns: I64
    depth: I64


def _depth_series(trace: RankTrace) -> _Series | None:
    """Every change of every stream's queue depth, grouped by stream, in time order (a launch before a start at
    the same time, so a depth never dips below the work launched)."""
    ev = trace.events
    rt, dev = launched_gpu_events(trace)
    if dev.size == 0:
        return None
    key = ev.device[dev].astype(np.int64) * _STREAMS + ev.stream[dev].astype(np.int64) + _STREAMS // 2
    keys = np.concatenate([key, key])
    ts = np.concatenate([ev.ts_ns[rt], ev.ts_ns[dev]])
    step = np.concatenate([np.ones(dev.size, np.int64), -np.ones(dev.size, np.int64)])
    order = np.lexsort((-step, ts, keys))
    keys, ts, step = keys[order], ts[order], step[order]
    running = np.cumsum(step)
    first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    before = np.repeat(running[first] - step[first], np.diff(np.append(first, keys.size)))
    return _Series(keys, ts, running - before)


def stream_queues(trace: RankTrace) -> tuple[tuple[StreamQueue, ...], int]:
    """Queue depth of each stream (the most launches first), and how many streams had launches."""
    series = _depth_series(trace)
    if series is None:
        return (), 0
    keys, ts, depth = series
    first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    changes = np.diff(np.append(first, keys.size))
    held_ns = np.append(np.diff(ts), 0)
    held_ns[np.append(first[1:], keys.size) - 1] = 0  # the last change of a stream holds until nothing follows
    span_ns = ts[np.append(first[1:], keys.size) - 1] - ts[first]
    area = np.add.reduceat(depth * held_ns, first)
    out = [StreamQueue(device=k // _STREAMS, stream=k % _STREAMS - _STREAMS // 2, launches=n // 2,
                       max_depth=int(mx), mean_depth=float(total / n),
                       time_mean_depth=float(a / s) if s > 0 else None)
           for k, n, mx, total, a, s in zip(keys[first].tolist(), changes.tolist(),
                                            np.maximum.reduceat(depth, first).tolist(),
                                            np.add.reduceat(depth, first).tolist(), area.tolist(), span_ns.tolist())]
    out.sort(key=lambda q: (-q.launches, q.device, q.stream))
    return tuple(out), len(out)


def queued(trace: RankTrace) -> Intervals:
    """The time some launched work was waiting to start: from its launch call's end to its start, merged."""
    def compute() -> Intervals:
        ev = trace.events
        rt, dev = launched_gpu_events(trace)
        return merge(ev.end_ns[rt], ev.ts_ns[dev])

    return trace.events.remembered("queued", compute)


class SideWait(NamedTuple):
    """The GPU-side wait inside a set of gaps: as intervals, and its time in each gap (ns)."""

    intervals: Intervals
    per_gap_ns: I64


def side_wait_in(trace: RankTrace, gaps: Intervals) -> SideWait:
    """The GPU-side wait (see the module's docstring) inside ``gaps``: merged, sorted gaps of the rank's GPU work."""
    if len(gaps) == 0:
        return SideWait(gaps, np.zeros(0, np.int64))
    waiting = intersect(gaps, queued(trace))
    in_gap = np.searchsorted(gaps.starts, waiting.starts, side="right") - 1
    per_gap = np.bincount(in_gap, weights=waiting.ends - waiting.starts, minlength=len(gaps)).astype(np.int64)
    long_wait = per_gap >= QUEUED_MIN_NS
    kept = long_wait[in_gap]
    unrecorded = _unlaunched_silent(trace, gaps) & ~long_wait & (gaps.ends - gaps.starts >= QUEUED_MIN_NS)
    per_gap = np.where(long_wait, per_gap, np.where(unrecorded, gaps.ends - gaps.starts, 0))
    intervals = union(Intervals(waiting.starts[kept], waiting.ends[kept]),
                      Intervals(gaps.starts[unrecorded], gaps.ends[unrecorded]))
    return SideWait(intervals, per_gap)


def gpu_side_wait(trace: RankTrace, busy: Intervals, start_ns: int, end_ns: int) -> Intervals:
    """The GPU-side wait over [start_ns, end_ns), given the rank's GPU busy time (every kernel, copy and set,
    merged)."""
    if end_ns <= start_ns:
        return Intervals(np.empty(0, np.int64), np.empty(0, np.int64))
    window = Intervals(np.array([start_ns], np.int64), np.array([end_ns], np.int64))
    return side_wait_in(trace, subtract(window, clip(busy, start_ns, end_ns))).intervals


def _unlaunched_silent(trace: RankTrace, gaps: Intervals) -> npt.NDArray[np.bool_]:
    """Gaps closed by GPU work no recorded call launched, during which the host recorded nothing (no host event
    starts or ends inside)."""
    ev = trace.events
    gpu_idx = np.flatnonzero(ev.mask(*GPU_KINDS))
    if gpu_idx.size == 0:
        return np.zeros(len(gaps), dtype=bool)
    _, dev = launched_gpu_events(trace)
    launched = np.zeros(len(ev), dtype=bool)
    launched[dev] = True
    nxt = np.searchsorted(ev.ts_ns[gpu_idx], gaps.ends, side="left")
    closed = nxt < gpu_idx.size
    unlaunched = np.zeros(len(gaps), dtype=bool)
    unlaunched[closed] = ~launched[gpu_idx[nxt[closed]]]
    bounds = ev.remembered("host bounds", lambda: _host_bounds(ev))
    inside = np.searchsorted(bounds, gaps.ends, side="left") - np.searchsorted(bounds, gaps.starts, side="right")
    return np.asarray(unlaunched & (inside == 0), dtype=bool)


def _host_bounds(ev: Events) -> I64:
    """Every start and end of a host event (runtime calls included), sorted."""
    host = ev.mask(Kind.RUNTIME, *CPU_KINDS)
    return np.sort(np.concatenate([ev.ts_ns[host], ev.end_ns[host]]), kind="stable")  # two runs, nearly sorted


def filling_call(trace: RankTrace, busy: Intervals, start_ns: int, end_ns: int) -> FillingCall | None:
    """The runtime call holding the most of [start_ns, end_ns), when that is ``FILLS_MIN`` of it or more and the
    GPU (``busy``: its kernels, copies and sets, merged) was busy under half the call: a host waiting in a sync
    while its GPU works is the healthy case, not a finding."""
    if end_ns <= start_ns:
        return None
    ev = trace.events
    rt = np.flatnonzero((ev.kind == Kind.RUNTIME) & (ev.ts_ns < end_ns) & (ev.end_ns > start_ns))
    if rt.size == 0:
        return None
    inside = np.minimum(ev.end_ns[rt], end_ns) - np.maximum(ev.ts_ns[rt], start_ns)
    best = int(np.argmax(inside))
    share = float(inside[best]) / (end_ns - start_ns)
    if share < FILLS_MIN:
        return None
    call_start, call_end = max(int(ev.ts_ns[rt[best]]), start_ns), min(int(ev.end_ns[rt[best]]), end_ns)
    gpu_busy = clip(busy, call_start, call_end).total / (call_end - call_start)
    if gpu_busy >= FILLS_MIN:
        return None
    return FillingCall(name=trace.names[int(ev.name_id[rt[best]])], duration_us=float(inside[best]) / 1000,
                       share=share, gpu_busy=gpu_busy)
