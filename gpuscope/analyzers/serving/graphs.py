"""CUDA/HIP graph replays: one host launch (``cudaGraphLaunch``, ``hipGraphLaunch``) that runs a whole captured
forward on the GPU. Their GPU time belongs to the graph's kernels, or where the profiler did not record those, to
the graph: never to idle time, nor to the host call.

- Recorded (CUPTI and roctracer give each replayed kernel the launch's correlation id): the replays of one graph
  are those that ran the same kernels in the same order; each is reported with its kernels by name and their time.
- Not recorded (some profiler set-ups record the launch alone): each replay's GPU time is bounded from the host's
  side: it starts when the launch was made, or later when work launched before it on the same stream was still
  running, and ends no later than the first work launched after it on that stream started, or the first host
  call that waited for the GPU (a sync) returned. ``with_graph_work`` adds that span to the rank as GPU work named
  ``GRAPH_WORK``, so every breakdown counts it as GPU time; the report says it is an estimate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import fields, replace

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace import classify
from gpuscope.analyzers.trace.intervals import merge
from gpuscope.analyzers.trace.steps import launched_gpu_events
from gpuscope.model.serving import GraphKernel, GraphReplay
from gpuscope.model.trace import Events, Kind, RankTrace

GRAPH_WORK = "graph replay (kernels not recorded)"
"""The name of the GPU work ``with_graph_work`` adds for a replay whose kernels the trace lacks."""
MAX_KERNELS = 100
"""Kernel names kept per graph (a decoder layer's graph has some tens)."""


def graph_launches(trace: RankTrace) -> npt.NDArray[np.intp]:
    """The rank's graph launch calls, in time order."""
    return np.flatnonzero(trace.name_mask(classify.is_graph_launch, Kind.RUNTIME))


def graph_replays(trace: RankTrace) -> tuple[GraphReplay, ...]:
    """Each graph's replays, most GPU time first: recorded graphs by their kernels, unrecorded ones as one entry
    whose time is the estimate ``with_graph_work`` added (kernels named ``GRAPH_WORK``)."""
    launches = graph_launches(trace)
    if launches.size == 0:
        return ()
    ev = trace.events
    rt, dev = launched_gpu_events(trace)
    is_launch = np.isin(rt, launches)
    rt, dev = rt[is_launch], dev[is_launch]
    estimated = ev.name_id[dev] == _name_id(trace, GRAPH_WORK)
    by_launch: dict[int, list[int]] = defaultdict(list)
    for r, d in zip(rt[~estimated].tolist(), dev[~estimated].tolist()):
        by_launch[r].append(d)
    groups: dict[tuple[int, ...], list[list[int]]] = defaultdict(list)
    for events in by_launch.values():
        events.sort(key=lambda d: int(ev.ts_ns[d]))
        groups[tuple(int(ev.name_id[d]) for d in events)].append(events)
    out = [_recorded(trace, replays) for replays in groups.values()]
    unrecorded = launches.size - len(by_launch)
    if unrecorded:
        spans = dev[estimated]
        out.append(GraphReplay(
            name="graph replays (kernels not recorded)", replays=unrecorded, kernels_per_replay=None,
            gpu_time_us=float(merge(ev.ts_ns[spans], ev.end_ns[spans]).total) / 1000 if spans.size else None,
            recorded=False))
    out.sort(key=lambda g: -(g.gpu_time_us or 0.0))
    return tuple(replace(g, name=f"graph {i + 1}") if g.recorded else g for i, g in enumerate(out))


def _recorded(trace: RankTrace, replays: list[list[int]]) -> GraphReplay:
    ev = trace.events
    total = sum(merge(ev.ts_ns[idx], ev.end_ns[idx]).total for idx in (np.asarray(e, dtype=np.intp) for e in replays))
    every = np.concatenate([np.asarray(e, dtype=np.intp) for e in replays])
    names, inverse = np.unique(ev.name_id[every], return_inverse=True)
    calls = np.bincount(inverse, minlength=names.size)
    times = np.bincount(inverse, weights=ev.dur_ns[every].astype(np.float64), minlength=names.size)
    kernels = sorted((GraphKernel(name=trace.names[int(n)], calls=int(c), total_us=float(t) / 1000)
                      for n, c, t in zip(names.tolist(), calls.tolist(), times.tolist())),
                     key=lambda k: -(k.total_us or 0.0))[:MAX_KERNELS]
    return GraphReplay(name="", replays=len(replays), kernels_per_replay=len(replays[0]), gpu_time_us=total / 1000,
                       recorded=True, kernels=tuple(kernels))


def with_graph_work(trace: RankTrace) -> tuple[RankTrace, float]:
    """The trace with one GPU event (``GRAPH_WORK``) for each graph replay whose kernels it does not hold, spanning
    the time the replay can have run (see the module's docstring), and that time in µs; the trace itself when
    every replay's kernels are there."""
    launches = graph_launches(trace)
    if launches.size == 0:
        return trace, 0.0
    ev = trace.events
    rt, dev = launched_gpu_events(trace)
    missing = launches[~np.isin(launches, rt)]
    if missing.size == 0:
        return trace, 0.0
    spans = _bounds(trace, missing, rt, dev)
    keep = [(launch, s, e) for launch, (s, e) in zip(missing.tolist(), spans) if e > s]
    if not keep:
        return trace, 0.0
    names = (*trace.names, GRAPH_WORK) if GRAPH_WORK not in trace.names else trace.names
    name_id = names.index(GRAPH_WORK)
    device = trace.main_device if trace.main_device is not None else 0
    stream = _stream_before(trace, rt, dev)
    added = _events(ev, [(s, e - s, name_id, stream(int(ev.ts_ns[launch])), device, int(ev.correlation[launch]))
                         for launch, s, e in keep])
    merged = _concat(ev, added)
    return replace(trace, events=merged, names=names), float(sum(e - s for _, s, e in keep)) / 1000


def _bounds(trace: RankTrace, missing: npt.NDArray[np.intp], rt: npt.NDArray[np.intp],
            dev: npt.NDArray[np.intp]) -> list[tuple[int, int]]:
    """(start, end) ns each unrecorded replay can have run in; (0, 0) where nothing bounds its end. Vectorised per
    stream: the work launched on it sorted by launch time, with the running maximum of its ends before each launch
    and the running minimum of its starts after."""
    ev = trace.events
    at, done = ev.ts_ns[missing], ev.end_ns[missing]
    stream_of = _stream_before(trace, rt, dev)
    streams = np.array([s if (s := stream_of(int(t))) is not None else -(2**31) for t in at.tolist()], np.int64)
    start, end = at.copy(), np.full(at.size, np.iinfo(np.int64).max)
    launch_ts, gpu_stream = ev.ts_ns[rt], ev.stream[dev].astype(np.int64)
    for s in np.unique(streams).tolist():
        mine = streams == s
        on = np.ones(dev.size, dtype=bool) if s == -(2**31) else gpu_stream == s
        order = np.argsort(launch_ts[on], kind="stable")
        lts, g0, g1 = launch_ts[on][order], ev.ts_ns[dev[on]][order], ev.end_ns[dev[on]][order]
        if lts.size == 0:
            continue
        before = np.searchsorted(lts, at[mine], side="left")
        prefix_end = np.maximum.accumulate(g1)
        start[mine] = np.where(before > 0, np.maximum(at[mine], prefix_end[np.maximum(before - 1, 0)]), at[mine])
        after = np.searchsorted(lts, at[mine], side="right")
        suffix_start = np.minimum.accumulate(g0[::-1])[::-1]
        end[mine] = np.where(after < lts.size, suffix_start[np.minimum(after, lts.size - 1)], end[mine])
    syncs = np.flatnonzero(trace.name_mask(classify.is_sync_runtime, Kind.RUNTIME))
    if syncs.size:
        order = np.argsort(ev.ts_ns[syncs], kind="stable")
        sync_ts, sync_end = ev.ts_ns[syncs][order], ev.end_ns[syncs][order]
        k = np.searchsorted(sync_ts, done, side="left")
        end = np.where(k < sync_ts.size, np.minimum(end, sync_end[np.minimum(k, sync_ts.size - 1)]), end)
    ok = (end > start) & (end < np.iinfo(np.int64).max)
    return [(int(s), int(e)) if good else (0, 0) for s, e, good in zip(start.tolist(), end.tolist(), ok.tolist())]


def _stream_before(trace: RankTrace, rt: npt.NDArray[np.intp],
                   dev: npt.NDArray[np.intp]) -> Callable[[int], int | None]:
    """A function: the stream of the GPU work launched last before a time (the stream a graph is launched on is
    the one the forward ran on), or None when nothing was launched before it."""
    ev = trace.events
    order = np.argsort(ev.ts_ns[rt], kind="stable")
    launch_ts, streams = ev.ts_ns[rt][order], ev.stream[dev][order]

    def stream(at: int) -> int | None:
        k = int(np.searchsorted(launch_ts, at, side="left"))
        return int(streams[k - 1]) if k > 0 else None

    return stream


def _events(like: Events, rows: list[tuple[int, int, int, int | None, int, int]]) -> Events:
    """Kernel events from (ts, dur, name id, stream, device, correlation) rows; every other column is "not given"
    (-1, NaN or 0, as the reader leaves a field a trace lacks), whatever columns ``Events`` has."""
    n = len(rows)
    ts, dur, name, stream, device, corr = (list(col) for col in zip(*rows))
    given = {"ts_ns": ts, "dur_ns": dur, "kind": [Kind.KERNEL] * n, "name_id": name, "device": device,
             "stream": [s if s is not None else 0 for s in stream], "correlation": corr}
    columns = {}
    for f in fields(Events):
        if not f.init:
            continue
        dtype = getattr(like, f.name).dtype
        if f.name in given:
            columns[f.name] = np.asarray(given[f.name], dtype=dtype)
        elif np.issubdtype(dtype, np.floating):
            columns[f.name] = np.full(n, np.nan, dtype)
        else:
            columns[f.name] = np.full(n, -1 if f.name in ("tid", "external_id", "sequence") else 0, dtype)
    return Events(**columns)


def _concat(a: Events, b: Events) -> Events:
    """Both event sets, in start order (a stable sort: events of one start keep their order)."""
    order = np.argsort(np.concatenate([a.ts_ns, b.ts_ns]), kind="stable")
    return Events(**{f.name: np.concatenate([getattr(a, f.name), getattr(b, f.name)])[order]
                     for f in fields(Events) if f.init})


def _name_id(trace: RankTrace, name: str) -> int:
    try:
        return trace.names.index(name)
    except ValueError:
        return -1

