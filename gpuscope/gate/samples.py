"""The per-step samples a gate tests: for each gated fact, the same quantity taken over each step of the job.

The step time's samples are every steady job step (``facts.job_step_times_us``: a job step ends when its slowest
rank's does, warm-up steps left out): the steps ``JobFacts.step_time_us`` is the mean of, slow ones included. GPU
busy's are the same steps. The stage shares are of the typical step (the steady steps less the lone outlier), so
their samples are the typical steps, as shares and as time in the stage (the share's numerator, which the gate
judges). A share's samples are that share split over the steps the way the report computes it:

- a stage share (data wait, exposed communication, or any stage the verdict names): the step's own share of the
  stage (its time in the stage's step-breakdown categories over the step), the ranks weighted by their windows as
  the verdict weighs them (``analyzers.diagnosis.stages.trace_shares``);
- GPU busy: the step's own busy share, the ranks weighted by their GPU time as ``JobFacts.gpu_busy`` weighs them.

Each sample is a share of its own step, so the samples vary as the steps do, in what the stage took and in how
long the step took: the step-to-step noise the test must see. What the report measures over the window and no step
holds on its own (host time blocked in collective waits, which the verdict counts as communication; GPU gaps over
500 ms, which it counts as idle rather than host overhead) is the report's stage share less the share the steps'
breakdowns give: that part is added to every step alike. A share with no per-step record (idle is measured over
the window only, and a live run has no steps) has no samples: its threshold alone decides.

(The samples are not shifted to average to the report's value: a shift that differs between the two runs, such as
the gap between a mean of step shares and a duration-weighted share, would read as a change beyond noise when the
steps are one job's. Resampled steps of one job showed it: four times the false alarms.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.diagnosis import facts
from gpuscope.model.diagnosis import Stage
from gpuscope.model.rank import RankReport, StepBreakdown, StepRecord
from gpuscope.model.report import Report

Floats = npt.NDArray[np.float64]

STAGE_CATEGORIES: dict[Stage, tuple[str, ...]] = {
    "data_loading": ("dataloader",),
    "communication": ("communication",),
    "memory": ("memcpy", "memset"),
    "host_overhead": ("runtime", "cpu_exec", "other"),
    "gpu_compute": ("kernel",),
}
"""The step-breakdown categories each stage is made of (``stages.rank_shares``). Idle has none: it is measured
over the window (GPU gaps over 500 ms), so it has no per-step samples."""


@dataclass(frozen=True)
class JobSteps:
    """The per-step samples of one run (or, ``blocked``, the samples of its periods)."""

    duration_us: Floats
    """Every steady job step's time (``facts.job_step_times_us``): the steps the step time is the mean of."""
    gpu_busy: Floats | None
    """Samples of ``JobFacts.gpu_busy`` over the same steps; None when it is unknown or no step records it."""
    stage_share: Mapping[Stage, Floats] = field(default_factory=dict)
    """Samples of each stage share the report states (``Report.stage_shares``) that steps record, over the
    typical steps."""
    stage_us: Mapping[Stage, Floats] = field(default_factory=dict)
    """The same, as the stage's time in each typical step (µs): the share's numerator, what the gate judges."""
    typical_us: Floats | None = None
    """The typical steps' times (the steps the stage samples are of); None: the same as ``duration_us``."""
    warmup_excluded: int = 0
    period: int | None = None
    """The period of the run's recurring slow steps (``JobFacts.recurring``), when they recur at one."""
    block: int = 1
    """Steps per sample: 1, or the period the samples were averaged over (``blocked``)."""

    def __len__(self) -> int:
        return len(self.duration_us)

    def share(self, stage: Stage | None) -> Floats | None:
        """The samples of ``stage``'s share; None where its steps do not record it."""
        return None if stage is None else self.stage_share.get(stage)

    def stage_time(self, stage: Stage | None) -> Floats | None:
        """The samples of ``stage``'s time per typical step (µs); None where its steps do not record it."""
        return None if stage is None else self.stage_us.get(stage)

    def blocked(self, period: int) -> JobSteps:
        """The samples of each run of ``period`` consecutive steps (the steps left after the last whole period
        are left out): a period's mean step, its steps' shares weighted by their times. Steps of one job split
        into periods are still exchangeable, and a stall that comes every ``period``-th step is in every sample,
        not in a few steps a random split could put anywhere."""
        if period <= 1:
            return self
        typical = self.typical_us if self.typical_us is not None else self.duration_us
        return JobSteps(duration_us=_block(self.duration_us, period),
                        gpu_busy=None if self.gpu_busy is None else _block(self.gpu_busy, period, self.duration_us),
                        stage_share={k: _block(v, period, typical) for k, v in self.stage_share.items()},
                        stage_us={k: _block(v, period) for k, v in self.stage_us.items()},
                        typical_us=_block(typical, period), warmup_excluded=self.warmup_excluded,
                        period=self.period, block=period)


def _block(values: Floats, period: int, weights: Floats | None = None) -> Floats:
    """The mean of each run of ``period`` values (weighted by ``weights``); a last partial run left out."""
    n = values.size // period * period
    v = values[:n].reshape(-1, period)
    if weights is None:
        return np.asarray(v.mean(axis=1), dtype=np.float64)
    w = weights[:n].reshape(-1, period)
    total = w.sum(axis=1)
    out = np.where(total > 0, (v * w).sum(axis=1) / np.where(total > 0, total, 1.0), v.mean(axis=1))
    return np.asarray(out, dtype=np.float64)


def job_steps(report: Report) -> JobSteps:
    """The steady steps of ``report`` and the per-step samples of its facts."""
    ranks = report.ranks
    rows, typical = _rows(ranks, facts.job_steps(ranks)), _rows(ranks, facts.typical_job_steps(ranks))
    warm = {s.name for r in ranks for s in r.per_step if s.warmup}
    known = facts.facts_of(report)
    shares = {stage: samples for stage in STAGE_CATEGORIES
              if (samples := _stage_samples(typical, stage, report.stage_shares.get(stage))) is not None}
    typical_us = np.array([max(s.duration_us for _, s in row) for row in typical], dtype=np.float64)
    busy = _weighted(rows, _gpu_time_us, lambda _, s: s.gpu_busy) if known.gpu_busy is not None else None
    recurring = known.recurring
    times = np.array(facts.job_step_times_us(ranks), dtype=np.float64)
    return JobSteps(duration_us=times, gpu_busy=busy, stage_share=shares,
                    stage_us={stage: v * typical_us for stage, v in shares.items()}, typical_us=typical_us,
                    warmup_excluded=len(warm), period=recurring.period if recurring is not None else None)


Row = list[tuple[RankReport, StepRecord]]


def _rows(ranks: Sequence[RankReport], steps: list[list[StepRecord]]) -> list[Row]:
    """The job steps ``steps`` (their names and order), each with the rank of every record."""
    names = [records[0].name for records in steps if records]
    by_rank = [(r, {s.name: s for s in r.per_step}) for r in ranks]
    return [[(r, steps_of[name]) for r, steps_of in by_rank if name in steps_of] for name in names]


def _weighted(rows: list[Row], weight: Callable[[RankReport], float],
              value: Callable[[RankReport, StepRecord], float | None]) -> Floats | None:
    """Per row, the weighted mean over its ranks of ``value``; None when a row has no rank with a value."""
    out: list[float] = []
    for row in rows:
        pairs = [(weight(r), v) for r, s in row if (v := value(r, s)) is not None and weight(r) > 0]
        total = sum(w for w, _ in pairs)
        if not pairs or total <= 0:
            return None
        out.append(sum(w * v for w, v in pairs) / total)
    return np.array(out, dtype=np.float64) if out else None


def _stage_time_us(b: StepBreakdown, stage: Stage) -> float:
    return sum(float(getattr(b, category)) for category in STAGE_CATEGORIES[stage])


def _window_us(r: RankReport) -> float:
    """The verdict weighs ranks with GPU work by their windows (``stages.trace_shares``)."""
    return r.window_us if r.gpu_busy is not None else 0.0


def _gpu_time_us(r: RankReport) -> float:
    """``JobFacts.gpu_busy`` weighs ranks by their GPU time."""
    window = r.steady_window_us if r.steady_window_us is not None else r.window_us
    return window * r.gpu_count if r.gpu_busy is not None else 0.0


def _stage_samples(rows: list[Row], stage: Stage, value: float | None) -> Floats | None:
    """The stage's share of each step, plus the part of the report's share no step holds."""
    def share(_: RankReport, s: StepRecord) -> float | None:
        return _stage_time_us(s.breakdown_us, stage) / s.duration_us if s.duration_us > 0 else None

    samples = _weighted(rows, _window_us, share)
    if samples is None or value is None:
        return None
    return samples + (value - _breakdown_share(rows, stage))


def _breakdown_share(rows: list[Row], stage: Stage) -> float:
    """The stage's share as the verdict takes it from the steps' breakdowns alone: each rank's stage time over its
    steady steps' time, the ranks weighted by their windows."""
    per_rank: dict[int, tuple[RankReport, float, float]] = {}
    for row in rows:
        for r, s in row:
            _, stage_us, step_us = per_rank.get(id(r), (r, 0.0, 0.0))
            per_rank[id(r)] = (r, stage_us + _stage_time_us(s.breakdown_us, stage), step_us + s.duration_us)
    known = [(_window_us(r), stage_us / step_us) for r, stage_us, step_us in per_rank.values()
             if step_us > 0 and _window_us(r) > 0]
    total = sum(w for w, _ in known)
    return sum(w * x for w, x in known) / total if total > 0 else 0.0
