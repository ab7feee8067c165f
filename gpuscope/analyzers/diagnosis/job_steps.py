"""The job's steps: each the same-named profiler step of every rank, ending when its slowest rank's does.

``job_steps`` are the steady steps: warm-up steps left out (a step marked warm-up on any rank is left out on all).
``typical_job_steps`` leave the outliers out too (``trace.step_stats``): the steps the job's step time
(``JobFacts.step_time_us``) is the mean of.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuscope.analyzers.trace.step_stats import outlier_mask
from gpuscope.model.rank import RankReport, StepRecord


def job_steps(ranks: Sequence[RankReport]) -> list[list[StepRecord]]:
    """The job's steady steps in time order, outliers included: each the same-named profiler step of every rank
    that has it. A step marked warm-up on any rank is left out on all of them."""
    groups: dict[str, list[StepRecord]] = {}
    warm: set[str] = set()
    for rank in ranks:
        for step in rank.per_step:
            groups.setdefault(step.name, []).append(step)
            if step.warmup:
                warm.add(step.name)
    rows = [records for name, records in groups.items() if name not in warm]
    rows.sort(key=lambda records: min(s.start_us for s in records))
    return rows


def job_step_times_us(ranks: Sequence[RankReport]) -> list[float]:
    """Each steady job step's time, outliers included: the slowest rank's duration of it."""
    return [duration_us(records) for records in job_steps(ranks)]


def typical_job_steps(ranks: Sequence[RankReport]) -> list[list[StepRecord]]:
    """The steps the job's step time is the mean of, in time order: the steady job steps that are not outliers."""
    rows = job_steps(ranks)
    out = outlier_mask([duration_us(records) for records in rows])
    return [records for records, o in zip(rows, out) if not o]


def typical_job_step_times_us(ranks: Sequence[RankReport]) -> list[float]:
    """The time of each typical job step (``typical_job_steps``): the slowest rank's duration of it."""
    return [duration_us(records) for records in typical_job_steps(ranks)]


def outlier_job_steps(ranks: Sequence[RankReport]) -> list[list[StepRecord]]:
    """The steady job steps that are outliers, in time order."""
    rows = job_steps(ranks)
    out = outlier_mask([duration_us(records) for records in rows])
    return [records for records, o in zip(rows, out) if o]


def duration_us(records: Sequence[StepRecord]) -> float:
    """A job step's time: its slowest rank's duration of it."""
    return max(s.duration_us for s in records)
