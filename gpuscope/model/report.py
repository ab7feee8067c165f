"""The analysis report: the one object behind every view (terminal, JSON, dashboard, gates).

Field names and meanings are stable (schema ``gpuscope.report/1``); fields may be added. Times are
microseconds where the name says ``_us``; shares are fractions 0..1; a value that cannot be
known is None (JSON null), never 0. Its parts live beside it: ``model.rank`` (what each rank's trace says),
``model.diagnosis`` (stages, facts, findings, verdict, recommendations), ``model.cost`` (the cost) and
``model.live`` (what live sampling saw).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpuscope.model.across import Arrivals, StragglerRank
from gpuscope.model.cost import CostReport
from gpuscope.model.diagnosis import Finding, JobFacts, OutlierStep, Recommendation, Stage, Verdict
from gpuscope.model.efficiency import Efficiency
from gpuscope.model.live import LiveSummary
from gpuscope.model.rank import RankReport
from gpuscope.model.serving import ServingReport

SCHEMA = "gpuscope.report/1"

Window = Literal["whole", "steady", "typical"]
"""The stretch of a trace a figure is taken over. ``whole``: the whole window, the profiler steps' span (or every
complete event's, without profiler steps), start-up and warm-up included (tables of the trace's events, such as its
kernels, launches and memory, take every event of it). ``steady``: the steady window, the steady
steps (warm-up and start-up left out), every one of them, slow ones included. ``typical``: the typical steps, the
steady steps less the lone outlier step (``Report.outlier_steps``); the steady steps when there is none."""

FIGURE_WINDOWS: dict[str, Window] = {
    "ranks[].window_us": "whole",
    "ranks[].temporal": "whole",
    "ranks[].idle_breakdown_us": "whole",
    "ranks[].top_kernels": "whole",
    "ranks[].launch": "whole",
    "ranks[].memory": "whole",
    "ranks[].steady_window_us": "steady",
    "ranks[].step_time_us": "steady",
    "ranks[].step_breakdown_us": "steady",
    "ranks[].gpu_busy": "steady",
    "ranks[].devices": "steady",
    "ranks[].communication": "steady",
    "ranks[].kernel_utilization": "steady",
    "ranks[].sm_efficiency": "steady",
    "ranks[].profile": "steady",
    "ranks[].host_in_gpu_idle": "steady",
    "ranks[].stage_shares": "typical",
    "facts.step_time_us": "steady",
    "facts.step_time_median_us": "steady",
    "facts.step_time_p90_us": "steady",
    "facts.step_time_spread_us": "steady",
    "facts.gpu_busy": "steady",
    "facts.typical_step_us": "typical",
    "facts.data_wait_share": "typical",
    "facts.exposed_comm_share": "typical",
    "stage_shares": "typical",
    "verdict": "typical",
    "cost.gpu_hours": "whole",
    "cost.total_usd": "whole",
    "cost.wasted_usd": "whole",
    "cost.per_step_usd": "steady",
    "cost.per_1k_steps_usd": "steady",
}
"""The window each trace figure of the report is over, by its JSON path (``Report.windows`` carries it in every
report): a figure's window is part of what it means."""


@dataclass(frozen=True)
class GpuSummary:
    model: str | None
    memory_bytes: int | None
    index: int | None = None
    mig_profile: str | None = None
    """The MIG instance's profile ("1g.10gb") when the GPU is one; ``model`` is then its parent's."""


@dataclass(frozen=True)
class RunSummary:
    id: str
    kind: str
    name: str = ""
    status: str = ""
    started_ns: int | None = None
    duration_s: float | None = None
    gpus: tuple[GpuSummary, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    """The run's tags: for a live run in a container, ``container.id``, ``container.runtime``, ``pod.uid``,
    ``pod.name``, ``pod.namespace`` (``collectors.container``) where its cgroup and environment tell them."""


@dataclass(frozen=True, kw_only=True)
class Report:
    """The whole analysis of one run (``gpuscope analyze --json`` prints it)."""

    schema: str = SCHEMA
    run: RunSummary
    ranks: tuple[RankReport, ...]
    verdict: Verdict
    findings: tuple[Finding, ...] = ()
    recommendations: tuple[Recommendation, ...] = ()
    cost: CostReport | None = None
    live: LiveSummary | None = None
    warnings: tuple[str, ...] = ()
    """What could not be read or analysed (a bad rank file, say), one line each."""
    unread_rank_files: tuple[str, ...] = ()
    """Trace files of the run that could not be read ("path: why"): ranks missing from ``ranks``. A JSON file that
    is no profiler trace at all (no ``traceEvents``) is no rank, and only a warning."""
    stage_shares: dict[Stage, float | None] = field(default_factory=dict)
    """Share of the job's (steady-state) step each stage accounts for, 0..1, keyed by stage code: the one set of
    numbers behind the verdict, the cost's waste by cause and every view. None where nothing could tell."""
    facts: JobFacts | None = None
    """The job-level figures every rule and view quotes (step time, GPU busy, peak memory, ...), computed once.
    None only in reports saved before they existed (``gpuscope.analyzers.diagnosis.facts.facts_of`` recomputes)."""
    efficiency: Efficiency | None = None
    """Model FLOPs, MFU and the roofline per kernel family (docs/efficiency.md); None without traces."""
    stragglers: tuple[StragglerRank, ...] = ()
    """Ranks the others wait for at their collectives, worst first (``model.across``); empty when no rank stands out
    (``arrivals.threshold`` says when one does) or the collectives could not be matched across ranks."""
    arrivals: Arrivals | None = None
    """How the ranks' collectives were matched and when each rank reached them; None when fewer than two ranks
    share a collective."""
    failed_checks: tuple[str, ...] = ()
    """The consistency checks this report failed, by name ("batch_vs_memory"; ``gpuscope.analyzers.consistency``):
    each is a gpuscope bug, its weaker claim withdrawn and ``warnings`` saying which. A gate fails over such a
    report."""

    @property
    def cpu_job(self) -> bool:
        """A trace run whose every rank recorded no GPU activity: a CPU job, with no GPU count, GPU time or price."""
        return self.run.kind == "trace" and bool(self.ranks) and all(r.cpu_only for r in self.ranks)
    outlier_steps: tuple[OutlierStep, ...] = ()
    """The lone slow steady job step (past ``JobFacts.outlier_threshold_us``, the only one that did not recur), when
    there is one: in the step time like every step, left out of the typical steps the stage shares and the verdict
    are taken over, and its extra time priced on its own."""
    windows: dict[str, Window] = field(default_factory=lambda: dict(FIGURE_WINDOWS))
    """The window each trace figure is over, by its JSON path (``FIGURE_WINDOWS``): whole window, steady window or
    typical steps."""
    serving: ServingReport | None = None
    """An inference server's tokens, load, latency and cost per token (live runs with ``--serving-metrics``), and
    its traces' prefill and decode phases and CUDA/HIP graph replays; None when the run shows none of them."""
