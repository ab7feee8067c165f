"""What the diagnosis says about a job: the stages a step splits into, the job's facts, findings, the verdict and
recommendations.

Part of the report (schema ``gpuscope.report/1``, field names stable); times are microseconds where the name says
``_us``, shares fractions 0..1, and what cannot be known is None (JSON null), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Stage = Literal["data_loading", "host_overhead", "communication", "memory", "gpu_compute", "idle"]
Resource = Literal["io", "cpu", "memory", "nccl", "gpu", "unknown"]
Severity = Literal["info", "warning", "critical"]

STAGES: tuple[Stage, ...] = ("data_loading", "host_overhead", "communication", "memory", "gpu_compute", "idle")


@dataclass(frozen=True)
class RecurringSteps:
    """Slow steps that came back in the window: part of the job's rhythm and of its step time, as often as they
    came (``analyzers.trace.step_stats.slow_steps``)."""

    steps: tuple[int | str, ...]
    """The trace's own numbers of the slow steps (``ProfilerStep#<n>``), in time order."""
    period: int | None
    """Every ``period``-th step is slow (a stall at a fixed period); None for slow steps at no one period."""
    per_period: int
    """How many steps of each period are slow (1 for "every 4th step"); 0 without a period."""
    extra_us: float
    """Their mean time over ``reference_us``, per slow step."""
    per_step_us: float
    """Their time over ``reference_us``, summed and spread over every steady step: what they add to the step time
    on average."""
    reference_us: float
    """The median of the steady steps that are not slow."""
    steady_steps: int
    """The steady steps they were found among."""


@dataclass(frozen=True)
class JobFacts:
    """The job-level numbers more than one rule or view uses, each computed once with one stated statistic
    (``gpuscope.analyzers.diagnosis.facts.DEFINITIONS``): every rule, the cost, the gate and every view read these.
    None where the run cannot tell."""

    step_time_us: float | None = None
    """The job's step time: the mean of all its steady steps, slow ones included (a job's step ends when its
    slowest rank's does; ``analyzers.trace.step_stats.step_time_us``): what a step costs."""
    steady_steps: int = 0
    """The steady job steps behind ``step_time_us`` (warm-up steps left out)."""
    typical_step_us: float | None = None
    """The mean of the typical steps (the steady steps less the lone outlier, if any): the step the stage shares
    are shares of. Equal to ``step_time_us`` when no step is an outlier."""
    typical_steps: int = 0
    """The typical steps behind ``typical_step_us``."""
    ranks: int = 0
    """Ranks (traces) the facts cover; 0 for a live run without traces."""
    gpu_busy: float | None = None
    """Share of the job's GPU time with GPU work running: the ranks' busy weighted by their GPU time (traces), else
    the live busy share averaged over the run's GPUs (``GpuLive.busy_mean``: NVML's utilization.gpu, the job's own
    SM share on a GPU it shared, DCGM's GR engine active on a MIG slice)."""
    gpu_busy_source: Literal["trace", "nvml", "dcgm"] | None = None
    peak_memory_share: float | None = None
    """The worst rank's (or GPU's) peak memory over its device memory: the figure every headroom decision uses."""
    peak_memory_bytes: int | None = None
    device_memory_bytes: int | None = None
    peak_memory_rank: int | None = None
    """The rank (trace) or GPU index (live) with that peak."""
    peak_memory_lower_bound: bool = False
    """The worst peak is only a lower bound (a trace without "Total Allocated")."""
    peak_memory_all_known: bool = False
    """Every rank's (or GPU's) peak is known exactly: only then is the worst peak the job's peak (right-sizing)."""
    data_wait_share: float | None = None
    """The data_loading stage share: the time the GPU waits for input, over the step."""
    exposed_comm_share: float | None = None
    """The communication stage share: collectives no computation hides, over the step."""
    model_flops_per_step: float | None = None
    """FLOPs of the job's GEMMs, convolutions and attention per steady step, summed over ranks, from recorded shapes."""
    peak_flops: float | None = None
    """Dense peak FLOP/s of one GPU for the type most model FLOPs ran in (the GPU spec table); None: not in it."""
    mfu: float | None = None
    """model_flops_per_step / (step_time x GPUs x peak_flops)."""
    unmodelled_share: float | None = None
    """Share of compute-kernel time launched by operators whose FLOPs cannot be modelled."""
    step_time_median_us: float | None = None
    """Median of all the steady job steps, slow ones included."""
    step_time_p90_us: float | None = None
    """90th percentile of all the steady job steps (linear interpolation between closest ranks)."""
    step_time_spread_us: float | None = None
    """Spread of the steady job steps: 1.4826 x their median absolute deviation from the median."""
    outlier_threshold_us: float | None = None
    """A steady job step longer than this is slow: median + max(3.5 x spread, 25% of the median) of the steps
    that recur at no period; None with fewer than 3 steady steps."""
    outlier_step_count: int = 0
    """1 when exactly one steady job step is slow and recurs at no period (the lone outlier,
    ``Report.outlier_steps``), else 0."""
    outlier_extra_us: float = 0.0
    """The lone outlier's time over ``typical_step_us``: per window (the profiled steps), not per step."""
    recurring: RecurringSteps | None = None
    """Slow steps that recur (every p-th step, or two or more at no period); None when none do."""


@dataclass(frozen=True)
class OutlierStep:
    """The one slow steady job step that did not recur (the lone outlier), what took its extra time, and what that
    time cost."""

    rank: int
    """The rank whose step was the longest (the job's step ends when its step does)."""
    step: int | str
    """The trace's own step number (``ProfilerStep#<step>``)."""
    time_us: float
    """The job's step: that rank's duration of it."""
    extra_us: float
    """``time_us`` less the job's typical step (``JobFacts.typical_step_us``)."""
    stage: Stage
    """The bottleneck stage the extra time went to: the one whose time grew most over the rank's typical step."""
    cause: str
    """What took the extra time, in words: the range that was long in this step and not in the others
    (``save_checkpoint (record_function range)``), a sync, a data stall, or untraced host time."""
    ranges: tuple[str, ...] = ()
    """The names of the ranges behind ``cause``, enclosing ones first (empty when no traced range took it)."""
    extra_usd: float | None = None
    """``extra_us`` on every GPU of the job at the run's price; None without a price."""


@dataclass(frozen=True)
class Finding:
    """One thing the analysis noticed, with the numbers behind it."""

    code: str
    """Stable: gates and tests key on it (e.g. "dataloader_share_high")."""
    severity: Severity
    title: str
    evidence: dict[str, float | int | str | None] = field(default_factory=dict)
    """Metric name (with its unit in the name) -> value."""
    time_share: float | None = None
    """Share of step (or run) time this finding concerns, 0..1."""
    recommendations: tuple[str, ...] = ()
    stage: Stage | None = None
    rank: int | None = None


@dataclass(frozen=True)
class Verdict:
    """What held the GPUs back, in the user's words."""

    primary: Stage | None
    resource: Resource
    secondary: tuple[Stage, ...] = ()
    confidence: float = 0.0
    evidence: dict[str, float | int | str | None] = field(default_factory=dict)
    summary: str = ""
    """One sentence a newcomer can read."""
    collectives: str = ""
    """The job's collective library as its user names it: "NCCL", "RCCL" on AMD GPUs, the process group's backend
    where that is not NCCL ("gloo"); empty where unknown (NCCL is meant). What ``resource_word`` says for "nccl"."""


_RESOURCE_WORDS: dict[str, str] = {"io": "I/O", "cpu": "CPU", "memory": "memory", "gpu": "GPU", "unknown": "unknown"}


def resource_word(verdict: Verdict) -> str:
    """The verdict's resource in the user's words, as every view shows it: "I/O", "CPU", "memory", the job's
    collective library ("NCCL", "RCCL", "gloo"), "GPU" or "unknown"."""
    if verdict.resource == "nccl":
        return verdict.collectives or "NCCL"
    return _RESOURCE_WORDS[verdict.resource]


@dataclass(frozen=True)
class Recommendation:
    """What to change, concretely, and what it should save."""

    code: str
    title: str
    detail: str
    est_step_saving: float | None
    """Expected fraction of step time saved, 0..1."""
    reasoning: str = ""
    """How est_step_saving was derived."""
    est_saving_usd: float | None = None
    stage: Stage | None = None
    saving_basis: Literal["step", "run"] = "step"
    """What ``est_step_saving`` is a fraction of: the typical step (every stage's advice), or the run's time (the
    outlier steps' advice: their time lies outside the typical step)."""
