"""Build the Report of a Run: per-rank analyses, live summary, diagnosis and cost, in one pure function."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpuscope.analyzers import consistency, cost, live
from gpuscope.analyzers.diagnosis import verdict
from gpuscope.analyzers.diagnosis.facts import job_facts
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.model.cost import JobSpec, Price
from gpuscope.model.errors import analysis_stage
from gpuscope.model.report import GpuSummary, RankReport, Report, RunSummary
from gpuscope.model.run import Run


@dataclass(frozen=True)
class AnalysisOptions:
    price: Price | None = None
    job: JobSpec = field(default_factory=JobSpec)


def analysed(run: Run) -> str:
    """How an analysis error names a run: its trace file, the folder of its rank files, or the run's id."""
    sources = sorted({t.source for t in run.traces})
    if len(sources) == 1:
        return sources[0]
    if sources:
        folders = {str(Path(s).parent) for s in sources}
        return folders.pop() if len(folders) == 1 else f"the {len(sources)} traces of run {run.meta.id}"
    return f"run {run.meta.id}"


@analysis_stage("the analysis", analysed)
def build_report(run: Run, options: AnalysisOptions | None = None, *, warnings: tuple[str, ...] = (),
                 ranks: Sequence[RankReport] | None = None) -> Report:
    """The report of ``run``. ``ranks``: ``analyze_rank`` of each of ``run.traces``, when already computed
    (the trace reader runs it in its worker processes)."""
    options = options or AnalysisOptions()
    if ranks is None or len(ranks) != len(run.traces):
        ranks = tuple(analyze_rank(t) for t in run.traces)
    ranks = tuple(ranks)
    live_summary = live.summarize(run)
    diagnosis = verdict.diagnose(run, ranks, live_summary)
    cost_report, recommendations = cost.assess(run, ranks, live_summary, diagnosis, options.price, options.job)
    report = Report(
        run=run_summary(run),
        ranks=ranks,
        verdict=diagnosis.verdict,
        findings=diagnosis.findings,
        recommendations=recommendations,
        cost=cost_report,
        live=live_summary,
        warnings=(*warnings, *live.stop_lines(live_summary)),
        stage_shares=dict(diagnosis.shares.shares) if diagnosis.shares is not None else {},
        facts=diagnosis.facts or job_facts(ranks, live_summary, {}),
    )
    return consistency.enforce(report)


def run_summary(run: Run) -> RunSummary:
    m = run.meta
    return RunSummary(
        id=m.id, kind=m.kind, name=m.name, status=m.status, started_ns=m.started_ns,
        duration_s=m.duration_ns / 1e9 if m.duration_ns is not None else None,
        gpus=tuple(GpuSummary(model=g.name, memory_bytes=g.memory_bytes, index=g.index, mig_profile=g.mig_profile)
                   for g in m.gpus),
        tags=dict(m.tags),
    )
