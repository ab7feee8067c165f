"""The step time of each run split into stages (compute by kernel family), per steady step, so that the parts of
the change add up to the change by construction.

For each steady job step (``facts.job_steps``: every steady step, slow ones and an outlier included, the steps the
job's step time is the mean of and the kernel and operator tables cover; a step ends when its slowest rank's
does), the TensorBoard plugin's
breakdown of every rank is pooled (summed over ranks, over the ranks' summed step time) and the pooled shares are
scaled to the job's step time. The categories go to stages as the report's stage shares take them
(``analyzers.diagnosis.stages.rank_shares``): DataLoader is data wait, Memcpy + Memset memory copies,
Communication exposed communication, Kernel compute, and Runtime + CPU Exec + Other host/launch, out of which
the report's idle share (GPU gaps over 500 ms) and its host collective waits are moved to idle and communication.
Compute is split by kernel family in proportion to the families' kernel time. Every step's parts add up to the
step, so their means add up to the mean step (the job's step time) and the parts' changes to its change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.diagnosis.facts import job_steps
from gpuscope.model.diagnosis import Stage
from gpuscope.model.diff import PartStage
from gpuscope.model.rank import StepRecord
from gpuscope.model.report import Report

Floats = npt.NDArray[np.float64]
PartKey = tuple[PartStage, str | None]
"""(stage, kernel family for gpu_compute, else None)."""

CATEGORY_STAGE: dict[str, PartStage] = {
    "kernel": "gpu_compute", "memcpy": "memory", "memset": "memory", "communication": "communication",
    "runtime": "host_overhead", "cpu_exec": "host_overhead", "other": "host_overhead", "dataloader": "data_loading",
}
STAGE_ORDER: tuple[PartStage, ...] = ("data_loading", "host_overhead", "communication", "memory", "gpu_compute",
                                      "idle")


@dataclass(frozen=True)
class SideSteps:
    """One run's steady job steps: the step time and each stage's time in each step (µs, one row per step)."""

    step_us: Floats
    stage_us: Mapping[PartStage, Floats]

    def __len__(self) -> int:
        return int(self.step_us.size)

    @property
    def mean_step_us(self) -> float | None:
        return float(self.step_us.mean()) if self.step_us.size else None


def side_steps(report: Report) -> SideSteps:
    """The report's steady job steps split into stages (empty without profiler steps)."""
    rows = [records for records in job_steps(report.ranks) if sum(s.duration_us for s in records) > 0]
    step = np.array([max(s.duration_us for s in records) for records in rows], dtype=np.float64)
    stages: dict[PartStage, Floats] = {st: np.zeros(len(rows)) for st in STAGE_ORDER}
    for j, records in enumerate(rows):
        for stage, share in _pooled_shares(records).items():
            stages[stage][j] += share * step[j]
    return _moved(SideSteps(step_us=step, stage_us=stages), report.stage_shares)


def _pooled_shares(records: list[StepRecord]) -> dict[PartStage, float]:
    total = sum(s.duration_us for s in records)
    out: dict[PartStage, float] = {}
    for category, stage in CATEGORY_STAGE.items():
        out[stage] = out.get(stage, 0.0) + sum(getattr(s.breakdown_us, category) for s in records) / total
    return out


def _moved(side: SideSteps, shares: Mapping[Stage, float | None]) -> SideSteps:
    """Idle gaps and host collective waits sit in the breakdown's host categories; the report's stage shares
    measure them (``rank_shares``): move that much of each step from host/launch to idle and communication."""
    mean = side.mean_step_us
    if not mean or shares.get("idle") is None or shares.get("communication") is None:
        return side
    host = side.stage_us["host_overhead"]
    idle_share = shares.get("idle") or 0.0
    wait_share = max(0.0, (shares.get("communication") or 0.0) - float(side.stage_us["communication"].mean()) / mean)
    room = float(host.mean()) / mean
    scale = min(1.0, room / (idle_share + wait_share)) if idle_share + wait_share > 0 else 0.0
    idle = idle_share * scale * side.step_us
    wait = wait_share * scale * side.step_us
    stages = dict(side.stage_us)
    stages["host_overhead"] = host - idle - wait
    stages["idle"] = stages["idle"] + idle
    stages["communication"] = stages["communication"] + wait
    return SideSteps(step_us=side.step_us, stage_us=stages)


def split_compute(side: SideSteps, families: Mapping[str, float]) -> dict[PartKey, Floats]:
    """Each part's time per step: the stages, with compute split by the families' shares of kernel time."""
    parts: dict[PartKey, Floats] = {}
    total = sum(v for v in families.values() if v > 0)
    for stage in STAGE_ORDER:
        values = side.stage_us[stage]
        if stage != "gpu_compute" or total <= 0:
            parts[(stage, None)] = values
            continue
        for family, us in families.items():
            if us > 0:
                parts[(stage, family)] = values * (us / total)
    return parts
