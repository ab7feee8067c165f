"""Start-up in a trace left out of the steady window: warm-up steps, and the opening of a trace without steps.

A trace that starts at the first call of a job holds work that never comes back (``onetime`` finds it: CUDA/HIP
initialisation, NCCL communicator init, cuDNN autotuning, torch.compile, CUDA-graph capture, any other one-time
first call). Taken for the steady state, that time reads as a host-bound or idle GPU. Steps that are mostly
start-up are warm-up steps; the verdict is computed on the others. Without profiler steps, the start-up that
opens the window is cut off it; a trace that is mostly start-up and runs almost nothing on the GPU after it
holds start-up only, and gets no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace.intervals import clip, merge
from gpuscope.analyzers.trace.onetime import StartupSpans, find_startup
from gpuscope.analyzers.trace.steps import Steps, find_steps
from gpuscope.model.trace import GPU_KINDS, RankTrace

__all__ = ["StartupSpans", "StepPlan", "find_startup", "plan_steps", "steady_span", "warmup_steps"]

WARMUP_STEP_SHARE = 0.25
"""A step whose time is a quarter or more start-up is a warm-up step."""
FIRST_STEP_SLOW = 3.0
"""A first step over 3x the median of the others, with any start-up in it, is a warm-up step too."""
STEADY_MIN_SHARE = 0.1
"""Without profiler steps, a trace whose steady part is under 10% of its window holds start-up only."""
STARTUP_MOSTLY = 0.5
IDLE_AFTER_STARTUP = 0.01
"""Without profiler steps, a trace that is at least half start-up and whose GPU is busy under 1% of what follows
the start-up holds start-up only: nothing after it shows a steady state (the 43 s trace of a process that created
its CUDA context for 30 s and then ran a few kernels is no "host overhead" job)."""


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


def steady_span(window_ns: tuple[int, int], startup: StartupSpans,
                trace: RankTrace | None = None) -> tuple[int, int] | None:
    """Without profiler steps: the window after the start-up that opens it; None when little else is left, or
    when (given the ``trace``) the window is mostly start-up and the GPU all but idle after it."""
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
    if (trace is not None and trace.gpu_active and inside.total >= STARTUP_MOSTLY * (end - start)
            and _gpu_busy_ns(trace, steady_from, end) < IDLE_AFTER_STARTUP * (end - steady_from)):
        return None
    return steady_from, end


def _gpu_busy_ns(trace: RankTrace, start_ns: int, end_ns: int) -> int:
    ev = trace.events
    gpu = ev.mask(*GPU_KINDS)
    return clip(merge(ev.ts_ns[gpu], ev.end_ns[gpu]), start_ns, end_ns).total


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
    return StepPlan(steps, warm, _steady(steps, warm, spans, trace), spans)


def _steady(steps: Steps, warm: npt.NDArray[np.bool_], spans: StartupSpans, trace: RankTrace) -> Steps | None:
    if not len(steps):
        return steps
    if steps.from_profiler:
        if warm.all():
            return None
        keep = ~warm
        return Steps(tuple(n for n, k in zip(steps.names, keep) if k), steps.starts_ns[keep], steps.ends_ns[keep],
                     from_profiler=True, source=steps.source)
    span = steady_span(steps.window_ns, spans, trace)
    if span is None:
        return None
    return Steps(steps.names, np.array([span[0]], np.int64), np.array([span[1]], np.int64), from_profiler=False,
                 source=steps.source)
