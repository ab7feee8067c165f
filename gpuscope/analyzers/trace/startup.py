"""One-time start-up in a trace: lazy CUDA/HIP initialisation, torch.compile compilation, CUDA-graph capture.

A trace that starts at the first call of a job holds work that never comes back: the driver and
cuBLAS/cuDNN initialise lazily (about a second inside cudaFree/cudaMalloc/handle creation), torch.compile
compiles (seconds of Python), and CUDA graphs are captured once and instantiated. Taken for the steady
state, that time reads as a host-bound or idle GPU. Steps that are mostly start-up are warm-up steps;
the verdict is computed on the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace.intervals import EMPTY, Intervals, clip, merge, union
from gpuscope.analyzers.trace.steps import Steps, find_steps
from gpuscope.model.trace import CPU_KINDS, Kind, RankTrace

INIT_MIN_NS = 10_000_000
"""A runtime call of an initialising kind that takes longer than 10 ms is start-up (warm, these take µs)."""
WARMUP_STEP_SHARE = 0.25
"""A step whose time is a quarter or more start-up is a warm-up step."""
FIRST_STEP_SLOW = 3.0
"""A first step over 3x the median of the others, with any start-up in it, is a warm-up step too."""
STEADY_MIN_SHARE = 0.1
"""Without profiler steps, a trace whose steady part is under 10% of its window holds start-up only."""

# Calls that initialise the driver, a context, the caching allocator, library handles or modules
# (CUDA runtime/driver and their HIP names). Long only the first time.
_INIT_CALLS = re.compile(
    r"^(?:cuda|hip)(?:Free|Malloc|MallocHost|HostAlloc|MallocAsync|FreeHost|StreamCreate\w*|EventCreate\w*"
    r"|GetDeviceCount|GetDevice|SetDevice|DeviceGetAttribute|GetDeviceProperties\w*|FuncGetAttributes"
    r"|FuncSetAttribute|DeviceSetLimit|Init)$"
    r"|^cu(?:Init|DevicePrimaryCtxRetain|CtxCreate\w*|ModuleLoad\w*|ModuleGetFunction|LibraryLoad\w*"
    r"|MemAlloc\w*)$"
)
_CAPTURE_BEGIN = re.compile(r"^(?:cuda|hip|cu)StreamBeginCapture\w*$")
_CAPTURE_END = re.compile(r"^(?:cuda|hip|cu)StreamEndCapture\w*$")
_GRAPH_SETUP = re.compile(r"^(?:cuda|hip|cu)Graph(?:Instantiate\w*|Upload|Destroy|ExecDestroy)$")
# torch.compile: dynamo_timed wraps each phase in record_function(f"{key} (dynamo_timed)") (torch/_dynamo/utils.py).
_COMPILE = re.compile(r"\(dynamo_timed\)$"
                      r"|^(?:_compile\.compile_inner|compile_fx_inner|OutputGraph\.call_user_compiler)$")

INIT, CAPTURE, COMPILE = "CUDA/HIP initialisation", "CUDA-graph capture", "torch.compile compilation"


@dataclass(frozen=True)
class StartupSpans:
    """Start-up on one rank: where it lies, and how much of each kind (ns, overlaps counted once per kind)."""

    intervals: Intervals
    parts_ns: dict[str, int]
    calls: tuple[str, ...] = ()
    """The initialising calls seen (for the finding's words), most time first."""


def find_startup(trace: RankTrace) -> StartupSpans:
    ev = trace.events
    parts: dict[str, Intervals] = {}
    init = trace.name_mask(lambda s: _INIT_CALLS.search(s) is not None, Kind.RUNTIME) & (ev.dur_ns >= INIT_MIN_NS)
    if init.any():
        parts[INIT] = merge(ev.ts_ns[init], ev.end_ns[init])
    capture = _capture_spans(trace)
    if len(capture):
        parts[CAPTURE] = capture
    compile_ = trace.name_mask(lambda s: _COMPILE.search(s) is not None, *CPU_KINDS)
    if compile_.any():
        parts[COMPILE] = merge(ev.ts_ns[compile_], ev.end_ns[compile_])
    if not parts:
        return StartupSpans(EMPTY, {})
    names = [trace.names[i] for i in ev.name_id[init].tolist()]
    calls = tuple(sorted(set(names), key=lambda n: -int(ev.dur_ns[init][[m == n for m in names]].sum())))
    return StartupSpans(union(*parts.values()), {k: v.total for k, v in parts.items()}, calls)


def _capture_spans(trace: RankTrace) -> Intervals:
    """From each stream-capture begin to the end of capture on the same thread, plus graph instantiation."""
    ev = trace.events
    begin = np.flatnonzero(trace.name_mask(lambda s: _CAPTURE_BEGIN.search(s) is not None, Kind.RUNTIME))
    end = np.flatnonzero(trace.name_mask(lambda s: _CAPTURE_END.search(s) is not None, Kind.RUNTIME))
    starts, ends = [], []
    for b in begin.tolist():
        later = end[(ev.tid[end] == ev.tid[b]) & (ev.ts_ns[end] >= ev.ts_ns[b])]
        if later.size:
            starts.append(int(ev.ts_ns[b]))
            ends.append(int(ev.end_ns[later[0]]))
    setup = trace.name_mask(lambda s: _GRAPH_SETUP.search(s) is not None, Kind.RUNTIME)
    starts.extend(ev.ts_ns[setup].tolist())
    ends.extend(ev.end_ns[setup].tolist())
    if not starts:
        return EMPTY
    return merge(np.asarray(starts, np.int64), np.asarray(ends, np.int64))


def warmup_steps(steps: Steps, startup: StartupSpans) -> npt.NDArray[np.bool_]:
    """Which steps are warm-up: mostly start-up, or a first step far slower than the rest with start-up in it."""
    n = len(steps)
    flags = np.zeros(n, dtype=bool)
    if n == 0 or len(startup.intervals) == 0:
        return flags
    durations = (steps.ends_ns - steps.starts_ns).astype(float)
    inside = np.array([clip(startup.intervals, int(s), int(e)).total
                       for s, e in zip(steps.starts_ns, steps.ends_ns)], dtype=float)
    flags = np.asarray(inside >= WARMUP_STEP_SHARE * np.maximum(durations, 1.0), dtype=bool)
    if n >= 3 and inside[0] > 0 and durations[0] > FIRST_STEP_SLOW * float(np.median(durations[1:])):
        flags[0] = True
    return flags


def steady_span(window_ns: tuple[int, int], startup: StartupSpans) -> tuple[int, int] | None:
    """Without profiler steps: the window after the start-up that opens it; None when little else is left."""
    start, end = window_ns
    if end <= start:
        return None
    inside = clip(startup.intervals, start, end)
    if len(inside) == 0:
        return window_ns
    half = start + (end - start) // 2
    opening = inside.ends[inside.starts < half]
    steady_from = int(opening.max()) if opening.size else start
    if end - steady_from < STEADY_MIN_SHARE * (end - start):
        return None
    return steady_from, end


@dataclass(frozen=True)
class StepPlan:
    """A rank's steps and the steady part of them that step figures cover."""

    steps: Steps
    """Every profiler step (or the host span standing in for one, without ProfilerStep)."""
    warmup: npt.NDArray[np.bool_]
    steady: Steps | None
    """The steady steps (without profiler steps: the steady span as one); None when all is start-up."""
    startup: StartupSpans

    @property
    def analysed(self) -> Steps:
        """What step figures are taken over: the steady steps, or every step when none is steady."""
        return self.steady if self.steady is not None else self.steps


def plan_steps(trace: RankTrace) -> StepPlan:
    steps = find_steps(trace)
    spans = find_startup(trace)
    warm = warmup_steps(steps, spans) if steps.from_profiler else np.zeros(len(steps), dtype=bool)
    return StepPlan(steps, warm, _steady(steps, warm, spans), spans)


def _steady(steps: Steps, warm: npt.NDArray[np.bool_], spans: StartupSpans) -> Steps | None:
    if not len(steps):
        return steps
    if steps.from_profiler:
        if warm.all():
            return None
        keep = ~warm
        return Steps(tuple(n for n, k in zip(steps.names, keep) if k), steps.starts_ns[keep], steps.ends_ns[keep],
                     from_profiler=True)
    span = steady_span(steps.window_ns, spans)
    if span is None:
        return None
    return Steps(steps.names, np.array([span[0]], np.int64), np.array([span[1]], np.int64), from_profiler=False)
