"""The price of a change: per step, per job and per month, each run at its own GPU price.

A step costs the job's step time on every GPU of the job (``CostReport.per_step_usd``). A month is the work
the baseline gets through in ``hours_per_month`` hours on its GPUs (730: every hour of an average month, the
job running 24x7), done at the candidate's cost per step: what the same work costs more (or less) now.
"""

from __future__ import annotations

from gpuscope.analyzers.cost import US_PER_HOUR
from gpuscope.model.diff import ChangePrice, DiffSide

HOURS_PER_MONTH = 730.0
"""24 x 365 / 12: a job running 24x7."""


def step_usd(step_time_us: float | None, gpu_count: int | None, usd_per_gpu_hour: float | None) -> float | None:
    """One step on every GPU of the job at a price (what ``CostReport.per_step_usd`` holds at the run's price)."""
    if step_time_us is None or not gpu_count or usd_per_gpu_hour is None:
        return None
    return step_time_us * gpu_count / US_PER_HOUR * usd_per_gpu_hour


def change_price(base: DiffSide, cand: DiffSide, *, job_steps: int | None = None, job_hours: float | None = None,
                 hours_per_month: float = HOURS_PER_MONTH) -> ChangePrice:
    per_step = (cand.usd_per_step - base.usd_per_step
                if cand.usd_per_step is not None and base.usd_per_step is not None else None)
    steps_month = hours_per_month * US_PER_HOUR / base.step_time_us if base.step_time_us else None
    gpus = f"{base.gpu_count} GPU{'s' * (base.gpu_count != 1)}" if base.gpu_count else "its GPUs"
    assumption = (f"the work the baseline does in {hours_per_month:g} hours on {gpus}"
                  f"{' (a month of 24x7)' if hours_per_month == HOURS_PER_MONTH else ' a month'}, "
                  "at the candidate's cost per step instead of the baseline's")
    steps_job, basis = _job(base, job_steps, job_hours)
    return ChangePrice(
        usd_per_step=per_step,
        usd_per_job=steps_job * per_step if steps_job is not None and per_step is not None else None,
        job_basis=basis,
        usd_per_month=steps_month * per_step if steps_month is not None and per_step is not None else None,
        hours_per_month=hours_per_month,
        assumption=assumption,
    )


def _job(base: DiffSide, job_steps: int | None, job_hours: float | None) -> tuple[float | None, str | None]:
    if job_steps is not None:
        return float(job_steps), f"{job_steps:,} steps"
    if job_hours is not None and base.step_time_us:
        return job_hours * US_PER_HOUR / base.step_time_us, f"{job_hours:g} hours at the baseline's step time"
    return None, None
