"""Which steps to open in a timeline: the slowest and the median one of a rank.

Both are picked among the steady steps (warm-up steps left out, as every step figure does; all steps when
every one is warm-up), by their duration as every view reports it (``startup.plan_steps``: a step reaches
the end of the GPU work it launched). The median is the lower median, so it is a step that ran: of 6 steps,
the 3rd shortest. The steps are those every view takes (``steps.find_steps``: ProfilerStep, else a serving engine's
step ranges, or the user's ``--step-range``); a trace without any has none to pick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpuscope.analyzers.trace.startup import plan_steps
from gpuscope.model.errors import analysis_stage
from gpuscope.model.trace import RankTrace, source_of

Why = Literal["slowest", "median"]


@dataclass(frozen=True)
class StepWindow:
    """One profiler step of one rank, as a span of time."""

    rank: int
    name: str
    """The step's number, as ``ProfilerStep#<name>`` gives it (for steps an engine's or the user's ranges mark:
    their order in the trace, from 0)."""
    start_ns: int
    end_ns: int
    why: tuple[Why, ...]
    """Why it was picked: slowest, median, or both (a rank of one or two steps)."""
    source: str = "ProfilerStep"
    """What marked the step (``Steps.source``)."""

    @property
    def duration_us(self) -> float:
        return (self.end_ns - self.start_ns) / 1000


@analysis_stage("the choice of the slowest and median steps", source_of)
def slowest_and_median(trace: RankTrace) -> tuple[StepWindow, ...]:
    """The rank's slowest step, then its median one (one window when they are the same step)."""
    plan = plan_steps(trace)
    steps = plan.steps
    if not steps.from_profiler or not len(steps):
        return ()
    candidates = np.flatnonzero(~plan.warmup) if not plan.warmup.all() else np.arange(len(steps))
    durations = (steps.ends_ns - steps.starts_ns)[candidates]
    by_length = candidates[np.argsort(durations, kind="stable")]
    slowest = int(candidates[int(np.argmax(durations))])
    median = int(by_length[(by_length.size - 1) // 2])

    def window(i: int, why: tuple[Why, ...]) -> StepWindow:
        return StepWindow(rank=trace.rank, name=steps.names[i], start_ns=int(steps.starts_ns[i]),
                          end_ns=int(steps.ends_ns[i]), why=why, source=steps.source)

    if slowest == median:
        return (window(slowest, ("slowest", "median")),)
    return window(slowest, ("slowest",)), window(median, ("median",))


def slowest_rank_windows(traces: Sequence[RankTrace]) -> tuple[RankTrace, tuple[StepWindow, ...]] | None:
    """The rank whose slowest step is the slowest of the job (the first such rank), with its slowest and median
    steps: what a report offers to open. None when no rank has profiler steps."""
    best: tuple[RankTrace, tuple[StepWindow, ...]] | None = None
    for trace in traces:
        windows = slowest_and_median(trace)
        if windows and (best is None or windows[0].duration_us > best[1][0].duration_us):
            best = trace, windows
    return best
