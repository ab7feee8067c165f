"""The job's steps: each the same-named profiler step of every rank, ending when its slowest rank's does.

``job_steps`` are the steady steps (a step marked warm-up on any rank is left out on all): the job's step time
(``JobFacts.step_time_us``) is the mean of their times, every one counted. ``job_slow_steps`` says which of them
are slow and how they come (``trace.step_stats``); ``typical_job_steps`` leave out the lone slow step, the
outlier, when there is one: the steps the stage shares and the verdict are taken over.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuscope.analyzers.trace.step_stats import SlowSteps, slow_steps
from gpuscope.model.rank import RankReport, StepRecord


def job_steps(ranks: Sequence[RankReport]) -> list[list[StepRecord]]:
    """The job's steady steps in time order, slow ones included: each the same-named profiler step of every rank
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
    """Each steady job step's time: the slowest rank's duration of it (the step time is their mean)."""
    return [duration_us(records) for records in job_steps(ranks)]


def job_slow_steps(ranks: Sequence[RankReport]) -> SlowSteps:
    """Which steady job steps are slow (indices into ``job_steps``), and how they come."""
    return slow_steps(job_step_times_us(ranks))


def typical_job_steps(ranks: Sequence[RankReport]) -> list[list[StepRecord]]:
    """The job's typical steps in time order: its steady steps less the lone slow step (the outlier), if any."""
    rows = job_steps(ranks)
    lone = slow_steps([duration_us(records) for records in rows]).lone
    return [records for i, records in enumerate(rows) if i != lone]


def typical_job_step_times_us(ranks: Sequence[RankReport]) -> list[float]:
    """The time of each typical job step (``typical_job_steps``): the slowest rank's duration of it."""
    return [duration_us(records) for records in typical_job_steps(ranks)]


def outlier_job_steps(ranks: Sequence[RankReport]) -> list[list[StepRecord]]:
    """The lone slow job step, the outlier, when there is one (an empty list otherwise)."""
    rows = job_steps(ranks)
    lone = slow_steps([duration_us(records) for records in rows]).lone
    return [rows[lone]] if lone is not None else []


def duration_us(records: Sequence[StepRecord]) -> float:
    """A job step's time: its slowest rank's duration of it."""
    return max(s.duration_us for s in records)
