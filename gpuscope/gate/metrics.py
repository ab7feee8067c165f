"""The gated metrics: one function each, read from the report the analysis produced, each with one stated statistic.

A metric's value is what the gate's change and threshold are taken on; its per-step samples are what the
significance test runs over. ``MetricSpec.definition`` says what the value is, and every output prints it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpuscope.gate.config import MetricKey
from gpuscope.gate.result import ChangeKind, Unit
from gpuscope.gate.samples import Floats, JobSteps, job_steps
from gpuscope.model.report import Report, Stage

US_PER_HOUR = 3.6e9


@dataclass(frozen=True)
class Side:
    """One run as the gate sees it: its report and its steady steps (``job_steps``), taken once."""

    report: Report
    steps: JobSteps


def side(report: Report) -> Side:
    return Side(report, job_steps(report))


def step_time_us(report: Report) -> float | None:
    """Median of the job's steady steps; a job's step lasts until its slowest rank's ends (warm-up left out)."""
    steps = job_steps(report).duration_us
    return float(np.median(steps)) if len(steps) else None


def gpu_busy(report: Report) -> float | None:
    """Mean over the ranks of each rank's GPU busy share (kernel, memcpy or memset running over its steady window,
    ``RankReport.gpu_busy``); None on a CPU-only trace."""
    known = [r.gpu_busy for r in report.ranks if r.gpu_busy is not None]
    return float(np.mean(known)) if known else None


def gpus(report: Report) -> int:
    """GPUs the ranks ran on (one per rank in most jobs; a CPU-only rank counts as one device too)."""
    return sum(r.gpu_count for r in report.ranks)


def cost_per_1k_steps_usd(report: Report) -> float | None:
    """``step_time_us`` x the ranks' GPUs x the report's price per GPU-hour, for 1,000 steps; None without a price."""
    step_us = step_time_us(report)
    price = report.cost.usd_per_gpu_hour if report.cost is not None else None
    if step_us is None or price is None:
        return None
    return step_us * gpus(report) * price / US_PER_HOUR * 1000


def stage_share(stage: Stage) -> Callable[[Report], float | None]:
    """The report's share of the step in ``stage`` (``Report.stage_shares``: the verdict's and the cost's numbers)."""

    def share(report: Report) -> float | None:
        return report.stage_shares.get(stage)

    return share


def peak_memory_bytes(report: Report) -> float | None:
    """The largest peak allocated memory over the ranks (``Memory.peak_allocated_bytes``)."""
    peaks = [r.memory.peak_allocated_bytes for r in report.ranks if r.memory.peak_allocated_bytes is not None]
    return float(max(peaks)) if peaks else None


def _cost_samples(s: Side) -> Floats:
    """Each steady step priced the way ``cost_per_1k_steps_usd`` prices the median step."""
    price = s.report.cost.usd_per_gpu_hour if s.report.cost is not None else None
    if price is None:
        return s.steps.duration_us[:0]
    return s.steps.duration_us * (gpus(s.report) * price / US_PER_HOUR * 1000)


@dataclass(frozen=True)
class MetricSpec:
    key: MetricKey
    title: str
    unit: Unit
    change_kind: ChangeKind
    higher_is_better: bool
    value: Callable[[Report], float | None]
    samples: Callable[[Side], Floats | None]
    """Per steady step, in the value's unit; None for a metric with one value per run."""
    definition: str
    """What the value is, in a line: printed with the gate's table and in every output."""


SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("step_time", "Step time (median)", "us", "relative", False, step_time_us,
               lambda s: s.steps.duration_us,
               "median of the steady steps; a job's step ends with its slowest rank's"),
    MetricSpec("gpu_busy", "GPU busy", "share", "points", True, gpu_busy, lambda s: s.steps.gpu_busy,
               "mean over ranks of the steady window's share with a kernel or copy running"),
    MetricSpec("cost_per_1k_steps", "Cost per 1,000 steps", "usd", "relative", False, cost_per_1k_steps_usd,
               _cost_samples, "median step time x GPUs x price per GPU-hour x 1,000"),
    MetricSpec("exposed_comm_share", "Exposed communication", "share", "points", False, stage_share("communication"),
               lambda s: s.steps.communication_share,
               "the report's share of the step in communication that compute does not hide"),
    MetricSpec("data_loading_share", "Data loading", "share", "points", False, stage_share("data_loading"),
               lambda s: s.steps.dataloader_share,
               "the report's share of the step spent loading data (DataLoader)"),
    MetricSpec("peak_memory", "Peak memory", "bytes", "relative", False, peak_memory_bytes, lambda s: None,
               "largest peak allocated memory over the ranks (one value per run)"),
)

BOTTLENECK_DEFINITION = "the verdict's primary stage: a stall stage that newly leads and grew fails"
