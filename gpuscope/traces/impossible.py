"""GPU events that cannot have happened, refused as a trace is read, so no figure or verdict ever sees them.

A kernel's, copy's or set's time comes from the device's clock through CUPTI or roctracer; a corrupt or
wrapped-around field gives a `dur` of days that the reader's range (0 to 7 days) still lets by. Two facts of how
work runs make such an event impossible, whatever its size:

- **past the host's record.** The profiler synchronises the device before it stops (``torch.profiler`` does
  ``torch.cuda.synchronize()`` on exit), so every GPU event ends before the host's last recorded call. One that
  starts inside the host's record and runs past its end by more than the whole record cannot be.
- **out of order on its stream.** A stream runs its work one item after another. An event whose stream's next
  event starts more than a profiler step before it would end, or that is far longer than the work around it
  while the next event on its stream starts and ends inside it, cannot be. Work a CUDA/HIP graph launched is
  left out of this rule: a graph's branches run side by side on the stream it was launched on.

Host events are kept whatever their length: a long host call is what the host's clock measured (a wait, or the
one-time start-up that ``gpuscope.analyzers.trace.startup`` leaves out of the steady window).
"""

from __future__ import annotations

import re
from dataclasses import fields

import numpy as np
import numpy.typing as npt

from gpuscope.model.trace import GPU_KINDS, DroppedEvent, Events, Kind, duration_words

FAR_LONGER = 1000.0
"""An event this many times longer than the longest of its neighbours on the stream is "far longer"."""
NEIGHBOURS = 8
"""How many events before and after it on its stream an event is compared with."""
NEIGHBOUR_FLOOR_NS = 1_000
"""Neighbours shorter than 1 µs count as 1 µs: clocks round the shortest kernels down to 0."""

_HOST_KINDS = (Kind.RUNTIME, Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON, Kind.STEP)
_GRAPH_LAUNCH = re.compile(r"^(?:cuda|hip|cu)GraphLaunch\w*$")
_KIND_WORDS = {Kind.KERNEL: "kernel", Kind.MEMCPY: "memcpy", Kind.MEMSET: "memset"}


def refuse_impossible(events: Events, names: tuple[str, ...]) -> tuple[Events, tuple[DroppedEvent, ...]]:
    """``events`` less the GPU events that cannot have happened, and those events with the rule each broke."""
    reasons = past_the_host(events)
    for i, why in out_of_order(events, names).items():
        reasons.setdefault(i, why)
    if not reasons:
        return events, ()
    bad = np.zeros(len(events), dtype=bool)
    bad[list(reasons)] = True
    dropped = tuple(DroppedEvent(name=names[int(events.name_id[i])], kind=_KIND_WORDS[Kind(int(events.kind[i]))],
                                 duration_ns=int(events.dur_ns[i]), device=int(events.device[i]),
                                 stream=int(events.stream[i]), why=reasons[i])
                    for i in sorted(reasons))
    return _kept(events, ~bad), dropped


def past_the_host(events: Events) -> dict[int, str]:
    """GPU events that start inside the host's record and run past its end by more than the whole record."""
    host = events.mask(*_HOST_KINDS)
    if not host.any():
        return {}  # a GPU-only trace: nothing records the profiling session's end
    start, end = int(events.ts_ns[host].min()), int(events.end_ns[host].max())
    span = end - start
    if span <= 0:
        return {}
    past = events.end_ns - end
    hits = np.flatnonzero(events.mask(*GPU_KINDS) & (events.ts_ns < end) & (past > span) & (events.dur_ns > span))
    return {int(i): f"it runs {duration_words(int(past[i]))} past the host's last recorded call, longer than the "
                    f"host's whole record of {duration_words(span)}" for i in hits}


def out_of_order(events: Events, names: tuple[str, ...]) -> dict[int, str]:
    """Stream-ordered GPU events that overlap the next event on their stream in a way a stream cannot run."""
    order = _stream_order(events, names)
    if order.size < 2:
        return {}
    dev, stream = events.device[order], events.stream[order]
    same = (dev[1:] == dev[:-1]) & (stream[1:] == stream[:-1])
    pos = np.flatnonzero(same)  # positions p (in ``order``) whose next event is on the same stream
    a, b = order[pos], order[pos + 1]
    overlap = events.end_ns[a] - events.ts_ns[b]
    out: dict[int, str] = {}
    step_ns = _median_step_ns(events)
    if step_ns is not None:
        for i, o in zip(a[overlap > step_ns].tolist(), overlap[overlap > step_ns].tolist()):
            out[i] = (f"the next event on its stream starts {duration_words(o)} before it would end, more than a "
                      f"profiler step ({duration_words(step_ns)}); a stream runs its work in order")
    inside = (overlap > 0) & (events.end_ns[b] <= events.end_ns[a])
    if inside.any():
        cand = pos[inside]
        around = _neighbours_max_ns(events.dur_ns[order], _group_ids(same), cand)
        ratio = events.dur_ns[order[cand]] / np.maximum(around, NEIGHBOUR_FLOOR_NS)
        for i, r in zip(order[cand][ratio > FAR_LONGER].tolist(), ratio[ratio > FAR_LONGER].tolist()):
            out.setdefault(i, f"{r:,.0f}x longer than the work around it on its stream, and the next event on the "
                              "stream starts and ends inside it; a stream runs its work in order")
    return out


def _stream_order(events: Events, names: tuple[str, ...]) -> npt.NDArray[np.intp]:
    """Indices of the GPU events on a known stream that the stream runs in order (not launched by a graph),
    sorted by device, stream and start."""
    gpu = events.mask(*GPU_KINDS) & (events.stream >= 0)
    graph_ids = np.flatnonzero(np.array([_GRAPH_LAUNCH.match(n) is not None for n in names], dtype=bool))
    if graph_ids.size:
        launches = events.mask(Kind.RUNTIME) & np.isin(events.name_id, graph_ids) & (events.correlation >= 0)
        if launches.any():
            gpu &= ~np.isin(events.correlation, events.correlation[launches])
    idx = np.flatnonzero(gpu)
    return idx[np.lexsort((events.ts_ns[idx], events.stream[idx], events.device[idx]))]


def _group_ids(same: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp]:
    """For each position of the stream order, a number shared by the positions of its stream."""
    return np.concatenate([[0], np.cumsum(~same)])


def _neighbours_max_ns(dur_ns: npt.NDArray[np.int64], group: npt.NDArray[np.intp],
                       at: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    """The longest duration among the ``NEIGHBOURS`` events before and after each position in ``at``, on its
    stream (0 where it has none)."""
    best = np.zeros(at.size, dtype=np.int64)
    for k in (*range(-NEIGHBOURS, 0), *range(1, NEIGHBOURS + 1)):
        other = at + k
        ok = (other >= 0) & (other < dur_ns.size)
        ok[ok] &= group[other[ok]] == group[at[ok]]
        best[ok] = np.maximum(best[ok], dur_ns[other[ok]])
    return best


def _median_step_ns(events: Events) -> int | None:
    steps = events.dur_ns[events.mask(Kind.STEP)]
    return int(np.median(steps)) if steps.size and np.median(steps) > 0 else None


def _kept(events: Events, keep: npt.NDArray[np.bool_]) -> Events:
    columns = {f.name: getattr(events, f.name) for f in fields(Events) if f.init}
    return Events(**{name: (col[keep] if col.size == keep.size else col) for name, col in columns.items()})
