"""Build the Report of a Run: per-rank analyses, live summary, diagnosis and cost, in one pure function."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuscope.analyzers import cost, live
from gpuscope.analyzers.diagnosis import verdict
from gpuscope.analyzers.ranks import RankSummary, summarize_rank
from gpuscope.model.cost import JobSpec, Price
from gpuscope.model.report import GpuSummary, Report, RunSummary
from gpuscope.model.run import Run


@dataclass(frozen=True)
class AnalysisOptions:
    price: Price | None = None
    job: JobSpec = field(default_factory=JobSpec)


def build_report(run: Run, options: AnalysisOptions | None = None, *, warnings: tuple[str, ...] = (),
                 ranks: Sequence[RankSummary] | None = None) -> Report:
    """The report of ``run``. ``ranks``: ``summarize_rank`` of each of its ranks, where they were computed
    already (the workers that read the traces); without them, each of ``run.traces`` is summarized here."""
    options = options or AnalysisOptions()
    summaries = tuple(ranks) if ranks is not None else tuple(summarize_rank(t) for t in run.traces)
    reports = tuple(s.report for s in summaries)
    live_summary = live.summarize(run)
    diagnosis = verdict.diagnose(run, reports, live_summary, evidence=tuple(s.evidence for s in summaries))
    cost_report, recommendations = cost.assess(run, reports, live_summary, diagnosis, options.price, options.job)
    return Report(
        run=run_summary(run),
        ranks=reports,
        verdict=diagnosis.verdict,
        findings=diagnosis.findings,
        recommendations=recommendations,
        cost=cost_report,
        live=live_summary,
        warnings=warnings,
        stage_shares=dict(diagnosis.shares.shares) if diagnosis.shares is not None else {},
    )


def run_summary(run: Run) -> RunSummary:
    m = run.meta
    return RunSummary(
        id=m.id, kind=m.kind, name=m.name, status=m.status, started_ns=m.started_ns,
        duration_s=m.duration_ns / 1e9 if m.duration_ns is not None else None,
        gpus=tuple(GpuSummary(model=g.name, memory_bytes=g.memory_bytes, index=g.index) for g in m.gpus),
    )
