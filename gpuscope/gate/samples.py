"""The per-step samples a gate tests: a job's steady steps, taken across its ranks.

A job's step ends when its slowest rank's does, so a step's time is the maximum over ranks; the other
per-step figures pool the ranks (busy and stage time summed over ranks, over the ranks' summed step time).
Warm-up steps (``StepRecord.warmup`` on any rank) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.diagnosis import facts
from gpuscope.model.rank import StepRecord
from gpuscope.model.report import Report

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class JobSteps:
    """One row per steady step of the job (same order in every array)."""

    duration_us: Floats
    """The slowest rank's step time."""
    gpu_busy: Floats | None
    """Busy share of the step over the ranks that report it; None when no step has one."""
    dataloader_share: Floats
    """DataLoader time (the step breakdown's) over the step, summed over ranks."""
    communication_share: Floats
    """Communication not hidden under kernels (the breakdown's category) over the step, summed over ranks."""
    warmup_excluded: int = 0

    def __len__(self) -> int:
        return len(self.duration_us)


def job_steps(report: Report) -> JobSteps:
    """The steady steps of ``report``, grouped by step name across its ranks as the report's facts group them
    (``facts.job_steps``: the steps its step time is taken over)."""
    rows = facts.job_steps(report.ranks)
    warm = {s.name for r in report.ranks for s in r.per_step if s.warmup}
    duration = np.array([max(s.duration_us for s in records) for records in rows], dtype=np.float64)
    total = np.array([sum(s.duration_us for s in records) for records in rows], dtype=np.float64)
    safe = np.where(total > 0, total, np.nan)
    loader = np.array([sum(s.breakdown_us.dataloader for s in records) for records in rows], dtype=np.float64)
    comm = np.array([sum(s.breakdown_us.communication for s in records) for records in rows], dtype=np.float64)
    return JobSteps(duration_us=duration, gpu_busy=_busy(rows), dataloader_share=np.nan_to_num(loader / safe),
                    communication_share=np.nan_to_num(comm / safe), warmup_excluded=len(warm))


def _busy(rows: list[list[StepRecord]]) -> Floats | None:
    values: list[float] = []
    for records in rows:
        known = [s for s in records if s.gpu_busy is not None and s.duration_us > 0]
        if not known:
            return None
        busy_us = sum((s.gpu_busy or 0.0) * s.duration_us for s in known)
        values.append(busy_us / sum(s.duration_us for s in known))
    return np.array(values, dtype=np.float64) if values else None
