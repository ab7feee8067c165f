"""Steps as the TensorBoard plugin saw them: host steps stretched to the GPU work they launched.

The steps are the ranges the trace marks them with: the ranges the user names (``RankTrace.step_range``, from
``--step-range NAME``), else the profiler's ``ProfilerStep#N``, else a serving engine's own step ranges (SGLang
``step[...]``, vLLM ``execute_...``: ``engine_steps``). A step starts at max(previous step's end, its range's
start) and ends at max(its range's end, the end of the last GPU event launched by a runtime call made inside it).
Trailing steps that launched no captured GPU work are dropped, and so is a last ProfilerStep that launched clearly
less than the step before (under 80%): the profiler stopped before their kernels were recorded (an engine's steps
differ from one another, so only the first rule holds for them). The first ProfilerStep starts after the GPU work
launched before it (the profiler began mid-iteration); an engine's or the user's first step starts at its range.
Without any of these ranges the whole host span is one step (in an Nsight Systems profile, whose NVTX ranges
may cover a part of the capture only, the whole capture). Unlike Holistic Trace Analysis, the last complete step
is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace import engine_steps
from gpuscope.model.profile import PROFILER_ATTR
from gpuscope.model.trace import CPU_KINDS, GPU_KINDS, Events, Kind, RankTrace

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Steps:
    names: tuple[str, ...]
    starts_ns: I64
    ends_ns: I64
    dropped: int = 0
    """Trailing steps left out because their GPU work was not captured."""
    from_profiler: bool = True
    """False when the trace marks no steps (no ProfilerStep, engine or user step range) and the host span stands
    in for one step."""
    source: str = "ProfilerStep"
    """What marked the steps: "ProfilerStep", "engine" (a serving engine's step ranges), "range NAME" (the
    user's ``--step-range NAME``), or "span" (none: the host span stands in)."""

    def __len__(self) -> int:
        return int(self.starts_ns.shape[0])

    @property
    def window_ns(self) -> tuple[int, int]:
        return (int(self.starts_ns[0]), int(self.ends_ns[-1])) if len(self) else (0, 0)


def launched_gpu_events(trace: RankTrace) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Pairs (runtime event index, GPU event index) joined on the correlation id (read-only arrays, computed
    once a trace)."""
    return trace.events.remembered("launched", lambda: _launched(trace.events))


def _launched(ev: Events) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    rt = np.flatnonzero((ev.kind == Kind.RUNTIME) & (ev.correlation >= 0))
    gpu = np.flatnonzero(ev.mask(*GPU_KINDS) & (ev.correlation >= 0))
    if rt.size == 0 or gpu.size == 0:
        return np.empty(0, np.intp), np.empty(0, np.intp)
    rt_corr = ev.correlation[rt]
    order = np.argsort(rt_corr, kind="stable")
    rt_sorted, corr_sorted = rt[order], rt_corr[order]
    pos = np.searchsorted(corr_sorted, ev.correlation[gpu])
    pos_ok = pos < corr_sorted.size
    match = np.zeros(gpu.size, dtype=bool)
    match[pos_ok] = corr_sorted[pos[pos_ok]] == ev.correlation[gpu][pos_ok]
    return rt_sorted[pos[match]], gpu[match]


def find_steps(trace: RankTrace) -> Steps:
    ev = trace.events
    step_idx, source = marked_steps(trace)
    from_profiler = step_idx.size > 0
    if from_profiler:
        starts = ev.ts_ns[step_idx].copy()
        ends = ev.end_ns[step_idx]
        names: tuple[str, ...] = (tuple(trace.names[i].removeprefix("ProfilerStep#") for i in ev.name_id[step_idx])
                                  if source == "ProfilerStep" else tuple(str(i) for i in range(step_idx.size)))
    else:
        host = ev.mask(*CPU_KINDS, Kind.STEP)
        whole = not host.any() or trace.attrs.get(PROFILER_ATTR) == "nsys"
        span = np.ones(len(ev), dtype=bool) if whole else host
        if not span.any():
            return Steps((), np.empty(0, np.int64), np.empty(0, np.int64), from_profiler=False, source=source)
        starts = np.array([ev.ts_ns[span].min()], np.int64)
        ends = np.array([ev.end_ns[span].max()], np.int64)
        names = ("0",)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    names = tuple(names[i] for i in order)
    return _consider_device_side(trace, names, starts, ends.copy(), from_profiler, source)


def marked_steps(trace: RankTrace) -> tuple[npt.NDArray[np.intp], str]:
    """The events that mark the rank's steps, and what they are (``Steps.source``); none without any."""
    if trace.step_range:
        user = engine_steps.step_ranges(trace, trace.step_range)
        if user.size:
            return user, f"range {trace.step_range}"
    profiler = np.flatnonzero(trace.events.kind == Kind.STEP)
    if profiler.size:
        return profiler, "ProfilerStep"
    engine = engine_steps.step_ranges(trace)
    return engine, "engine" if engine.size else "span"


def _consider_device_side(trace: RankTrace, names: tuple[str, ...], starts: I64, ends: I64,
                          from_profiler: bool, source: str) -> Steps:
    ev = trace.events
    rt, gpu = launched_gpu_events(trace)
    n = starts.size
    step_of = np.searchsorted(starts, ev.ts_ns[rt], side="right") - 1
    inside = step_of >= 0
    inside[inside] = ev.end_ns[rt[inside]] <= ends[step_of[inside]]
    # A runtime call that starts exactly at a step boundary belongs to the later step only if it starts
    # at or after that step's start (searchsorted 'right' does that).
    matched_steps, matched_gpu = step_of[inside], gpu[inside]
    counts = np.bincount(matched_steps, minlength=n)
    if counts.sum() == 0:
        # Steps never overlap: a step starts where the previous one ended at the earliest (µs timestamps rounded
        # to ns separately from their durations can overlap by a nanosecond).
        fixed = np.maximum(starts, np.concatenate(([starts[0]], np.maximum.accumulate(ends)[:-1])))
        return Steps(names, fixed, np.maximum(ends, fixed), from_profiler=from_profiler, source=source)
    dev_min = np.full(n, np.iinfo(np.int64).max)
    dev_max = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(dev_min, matched_steps, ev.ts_ns[matched_gpu])
    np.maximum.at(dev_max, matched_steps, ev.end_ns[matched_gpu])
    prev_end = int(starts[0])
    # GPU work launched before the first ProfilerStep that runs into it belongs to the step before (the profiler
    # began mid-iteration); an engine's step range starts its step, as the serving phases span it.
    if counts[0] > 0 and source == "ProfilerStep":
        unmatched = np.ones(len(ev), dtype=bool)
        unmatched[matched_gpu] = False
        unmatched &= ev.mask(*GPU_KINDS)
        before = ev.end_ns[unmatched]
        before = before[before < dev_min[0]]
        if before.size:
            prev_end = max(prev_end, int(before.max()))
    new_starts = np.empty(n, np.int64)
    new_ends = np.empty(n, np.int64)
    for i in range(n):
        start = max(prev_end, int(starts[i]))
        end = int(ends[i]) if counts[i] == 0 else max(int(ends[i]), int(dev_max[i]))
        end = max(end, start)
        new_starts[i], new_ends[i] = start, end
        prev_end = end
    keep = n
    if n > 1:
        last = int(np.flatnonzero(counts > 0)[-1])
        keep = last + 1
        if source == "ProfilerStep" and last > 0 and counts[last - 1] * 0.8 > counts[last]:
            keep = last
    return Steps(names[:keep], new_starts[:keep], new_ends[:keep], dropped=n - keep, from_profiler=from_profiler,
                 source=source)
