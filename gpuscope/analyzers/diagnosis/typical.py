"""Each rank seen over the job's typical steps: its steady steps less the job's lone outlier step.

The typical steps are a window of their own, used by the stage shares and the verdict alone: one slow step that
did not recur (a checkpoint save, a late batch) decides no bottleneck; it is reported, with its cause and its extra
time priced, on its own (``diagnosis.outliers``). Slow steps that recur are typical: they are the job's rhythm.
The step time, GPU busy and the cost stay over every steady step (``facts``). A view is the rank's RankReport with
the step figures of its typical steps (mean step, mean breakdown, busy share, and as window and steady window the
typical steps' total), and its trace evidence with the idle gaps and collective waits of those steps.
Without an outlier a view is the rank itself.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace

from gpuscope.analyzers.diagnosis.evidence import TraceEvidence
from gpuscope.analyzers.diagnosis.job_steps import outlier_job_steps
from gpuscope.analyzers.trace.breakdown import mean_breakdown
from gpuscope.model.rank import RankReport, StepRecord


def outlier_names(ranks: Sequence[RankReport]) -> frozenset[str]:
    """The name (number) of the job's lone outlier step, when it has one."""
    return frozenset(records[0].name for records in outlier_job_steps(ranks))


def typical_steps(r: RankReport, outliers: frozenset[str]) -> list[StepRecord]:
    """The rank's steady steps (all its steps when every one is warm-up, as its own figures take them), less the
    job's outlier step."""
    steady = [s for s in r.per_step if not s.warmup] or list(r.per_step)
    return [s for s in steady if s.name not in outliers]


def typical_rank(r: RankReport, outliers: frozenset[str]) -> RankReport:
    """``r`` with its step figures taken over its typical steps; ``r`` itself when none of its steps is an outlier."""
    kept = typical_steps(r, outliers)
    steady = [s for s in r.per_step if not s.warmup] or list(r.per_step)
    if not kept or len(kept) == len(steady):
        return r
    durations = [s.duration_us for s in kept]
    return replace(r, step_time_us=statistics.fmean(durations), window_us=sum(durations),
                   steady_window_us=sum(durations), step_breakdown_us=mean_breakdown([s.breakdown_us for s in kept]),
                   gpu_busy=typical_busy(r, kept))


def typical_busy(r: RankReport, kept: Sequence[StepRecord]) -> float | None:
    """The rank's GPU busy share over ``kept``: each step's busy share weighted by its duration. A rank that drove
    several GPUs keeps its own figure (the mean over its devices; steps carry the union of them)."""
    total = sum(s.duration_us for s in kept)
    if r.gpu_busy is None or len(r.devices) > 1 or total <= 0 or any(s.gpu_busy is None for s in kept):
        return r.gpu_busy
    return sum((s.gpu_busy or 0.0) * s.duration_us for s in kept) / total


def typical_evidence(ev: TraceEvidence, r: RankReport, outliers: frozenset[str]) -> TraceEvidence:
    """The rank's evidence over its typical steps: idle gaps summed and collective waits per step, over them."""
    kept = typical_steps(r, outliers)
    if not outliers or not kept or not any(s.name in outliers for s in r.per_step):
        return ev
    names = {s.name for s in kept}
    waits = sum(us for name, us in ev.collective_wait_by_step_us if name in names)
    return replace(ev, idle_gap_us=sum(us for name, us in ev.idle_gap_by_step_us if name in names),
                   gpu_wait_us=sum(us for name, us in ev.gpu_wait_by_step_us if name in names),
                   collective_wait_us=waits / len(kept))
