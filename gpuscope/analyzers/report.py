"""Build the Report of a Run: per-rank analyses, live summary, diagnosis and cost, in one pure function."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpuscope.analyzers import consistency, cost, live
from gpuscope.analyzers.diagnosis import verdict
from gpuscope.analyzers.diagnosis.evidence import TraceEvidence
from gpuscope.analyzers.diagnosis.facts import job_facts
from gpuscope.analyzers.efficiency.run import efficiency_facts, mfu_gap, run_efficiency
from gpuscope.analyzers.efficiency.run import recommendations as efficiency_recommendations
from gpuscope.analyzers.ranks import RankSummary, summarize_rank
from gpuscope.model.cost import JobSpec, Price
from gpuscope.model.errors import analysis_stage
from gpuscope.model.gpu_spec import GpuSpec
from gpuscope.model.rank import RankReport
from gpuscope.model.report import GpuSummary, Report, RunSummary
from gpuscope.model.run import Run


@dataclass(frozen=True)
class AnalysisOptions:
    price: Price | None = None
    job: JobSpec = field(default_factory=JobSpec)
    spec: GpuSpec | None = None
    """The run's GPU in the spec table (``gpuscope.specs``): its peaks give MFU and the roofline; None: n/a."""
    target_mfu: float | None = None
    """The attainable MFU the cost section prices the gap to; None: ``model.efficiency.DEFAULT_TARGET_MFU``."""
    target_mfu_source: str | None = None
    """Where ``target_mfu`` was set (``gpuscope.specs.resolve_target_mfu``)."""


def analysed(run: Run) -> str:
    """How an analysis error names a run: its trace file, the folder of its rank files, or the run's id."""
    # A trace run analysed from its ranks' summaries has no traces in hand: its catalog entry lists their files.
    sources = sorted({t.source for t in run.traces} or (set(run.meta.command) if run.meta.kind == "trace" else ()))
    if len(sources) == 1:
        return sources[0]
    if sources:
        folders = {str(Path(s).parent) for s in sources}
        return folders.pop() if len(folders) == 1 else f"the {len(sources)} traces of run {run.meta.id}"
    return f"run {run.meta.id}"


@analysis_stage("the analysis", analysed)
def build_report(run: Run, options: AnalysisOptions | None = None, *, warnings: tuple[str, ...] = (),
                 ranks: Sequence[RankSummary] | Sequence[RankReport] | None = None) -> Report:
    """The report of ``run``. ``ranks``: ``summarize_rank`` of each of its ranks, where they were computed
    already (the workers that read the traces); without them, each of ``run.traces`` is summarized here. Bare
    RankReports of ``run.traces`` serve too (their trace evidence is then read from the traces here)."""
    options = options or AnalysisOptions()
    reports: tuple[RankReport, ...]
    evidence: tuple[TraceEvidence, ...] | None = None
    if ranks is not None and not all(isinstance(r, RankSummary) for r in ranks):
        reports = tuple(r for r in ranks if isinstance(r, RankReport))
    else:
        summaries = [r for r in ranks if isinstance(r, RankSummary)] if ranks is not None else [
            summarize_rank(t) for t in run.traces]
        reports, evidence = tuple(s.report for s in summaries), tuple(s.evidence for s in summaries)
    live_summary = live.summarize(run)
    diagnosis = verdict.diagnose(run, reports, live_summary, evidence=evidence)
    facts = diagnosis.facts or job_facts(reports, live_summary, {})
    eff = run_efficiency(reports, facts, options.spec, run.meta.gpu_model, target_mfu=options.target_mfu,
                         target_source=options.target_mfu_source)
    facts = efficiency_facts(facts, eff)
    diagnosis = replace(diagnosis, facts=facts,
                        recommendations=(*diagnosis.recommendations, *efficiency_recommendations(eff)))
    cost_report, recommendations = cost.assess(run, reports, live_summary, diagnosis, options.price, options.job)
    cost_report = mfu_gap(cost_report, eff)
    report = Report(
        run=run_summary(run),
        ranks=reports,
        verdict=diagnosis.verdict,
        findings=diagnosis.findings,
        recommendations=recommendations,
        cost=cost_report,
        live=live_summary,
        warnings=(*warnings, *live.stop_lines(live_summary)),
        stage_shares=dict(diagnosis.shares.shares) if diagnosis.shares is not None else {},
        facts=facts,
        efficiency=eff,
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
