"""The gated metrics: one function each, read from the report the analysis produced, each with one stated statistic.

The job-level figures are the report's own facts (``Report.facts``, ``gpuscope.analyzers.diagnosis.facts``): the
step time, GPU busy, stage shares and peak memory `gpuscope analyze` shows are the ones the gate compares, with the
definitions it states. A metric's value is what the gate's change and threshold are taken on; its per-step samples
(``gpuscope.gate.samples``) are the same quantity taken step by step over the steady steps, and are what the
significance test runs over. A stage share is judged with its numerator too: its time per typical step, whose
samples the test runs over (a share that grows only because the rest of the step got faster is no regression).
``MetricSpec.definition`` says what the value is, and every output prints it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from gpuscope.analyzers.diagnosis.facts import DEFINITIONS, facts_of, job_facts
from gpuscope.gate.config import MetricKey
from gpuscope.gate.result import ChangeKind, Unit
from gpuscope.gate.samples import Floats, JobSteps, job_steps
from gpuscope.model.diagnosis import Stage
from gpuscope.model.report import Report

US_PER_HOUR = 3.6e9


@dataclass(frozen=True)
class Side:
    """One run as the gate sees it: its report and its steady steps (``job_steps``), taken once."""

    report: Report
    steps: JobSteps


def side(report: Report) -> Side:
    return Side(report, job_steps(report))


def ranks_only(report: Report, ranks: tuple[int, ...]) -> Report:
    """The report of these ranks alone, its facts taken over them (a partial comparison); the stage shares and
    the verdict stay the whole report's."""
    kept = tuple(r for r in report.ranks if r.rank in ranks)
    return replace(report, ranks=kept, facts=job_facts(kept, report.live, report.stage_shares))


def step_time_us(report: Report) -> float | None:
    """The report's step time (``JobFacts.step_time_us``)."""
    return facts_of(report).step_time_us


def gpu_busy(report: Report) -> float | None:
    """The report's GPU busy share (``JobFacts.gpu_busy``); None on a CPU-only trace."""
    return facts_of(report).gpu_busy


def gpus(report: Report) -> int:
    """GPUs the ranks ran on (one per rank in most jobs; none for a rank that recorded no GPU activity)."""
    return sum(r.gpu_count for r in report.ranks)


def cost_per_1k_steps_usd(report: Report) -> float | None:
    """``step_time_us`` x the ranks' GPUs x the report's price per GPU-hour, for 1,000 steps (the report's
    ``cost.per_1k_steps_usd`` for a trace run, here for the ranks compared); None without a price."""
    step_us = step_time_us(report)
    price = report.cost.usd_per_gpu_hour if report.cost is not None else None
    if step_us is None or price is None:
        return None
    return step_us * gpus(report) * price / US_PER_HOUR * 1000


def exposed_comm_share(report: Report) -> float | None:
    """The report's exposed communication share of the step (``JobFacts.exposed_comm_share``)."""
    return facts_of(report).exposed_comm_share


def data_loading_share(report: Report) -> float | None:
    """The report's data-wait share of the step (``JobFacts.data_wait_share``)."""
    return facts_of(report).data_wait_share


def typical_step_us(report: Report) -> float | None:
    """The typical step the stage shares are of (``JobFacts.typical_step_us``)."""
    return facts_of(report).typical_step_us


def stage_time_us(report: Report, share: float | None) -> float | None:
    """A stage's time per typical step: its share of the typical step x the typical step (the share's
    numerator)."""
    step = typical_step_us(report)
    return None if share is None or step is None else share * step


def peak_memory_bytes(report: Report) -> float | None:
    """The worst rank's peak allocated memory (``JobFacts.peak_memory_bytes``)."""
    peak = facts_of(report).peak_memory_bytes
    return None if peak is None else float(peak)


def _cost_samples(s: Side) -> Floats:
    """Each steady step priced the way ``cost_per_1k_steps_usd`` prices the step time (so the samples are the step
    time's, in dollars)."""
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
    stage: Stage | None = None
    """For a stage share: the stage, whose time per typical step (the share's numerator) is judged with the share:
    a share that grows because the rest of the step got faster is shown, not failed."""


SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("step_time", "Step time (mean)", "us", "relative", False, step_time_us, lambda s: s.steps.duration_us,
               DEFINITIONS["step_time_us"]),
    MetricSpec("gpu_busy", "GPU busy", "share", "points", True, gpu_busy, lambda s: s.steps.gpu_busy,
               DEFINITIONS["gpu_busy"]),
    MetricSpec("cost_per_1k_steps", "Cost per 1,000 steps", "usd", "relative", False, cost_per_1k_steps_usd,
               _cost_samples, "the step time above x the ranks' GPUs x the price per GPU-hour x 1,000"),
    MetricSpec("exposed_comm_share", "Exposed communication", "share", "points", False, exposed_comm_share,
               lambda s: s.steps.stage_time("communication"), DEFINITIONS["exposed_comm_share"]
               + "; judged with its time per typical step", "communication"),
    MetricSpec("data_loading_share", "Data loading", "share", "points", False, data_loading_share,
               lambda s: s.steps.stage_time("data_loading"), DEFINITIONS["data_wait_share"]
               + "; judged with its time per typical step", "data_loading"),
    MetricSpec("peak_memory", "Peak memory", "bytes", "relative", False, peak_memory_bytes, lambda s: None,
               "the worst rank's peak allocated memory (the largest share of its device); one value per run"),
)

BOTTLENECK_DEFINITION = ("the verdict's primary stage: a stall stage that newly leads fails when its share grew "
                         "beyond noise and the step or its cost got worse beyond noise")
