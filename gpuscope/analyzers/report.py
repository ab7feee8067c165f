"""Build the Report of a Run: per-rank analyses, live summary, diagnosis and cost, in one pure function."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpuscope.analyzers import consistency, cost, live
from gpuscope.analyzers.across.job import across_ranks, priced, worst_straggler
from gpuscope.analyzers.across.verdict import named_straggler
from gpuscope.analyzers.advice.gpu_swap import Capabilities, unknown_capabilities
from gpuscope.analyzers.diagnosis import verdict
from gpuscope.analyzers.diagnosis.evidence import TraceEvidence
from gpuscope.analyzers.diagnosis.facts import job_facts
from gpuscope.analyzers.efficiency.run import efficiency_facts, mfu_gap, run_efficiency
from gpuscope.analyzers.efficiency.run import recommendations as efficiency_recommendations
from gpuscope.analyzers.ranks import RankSummary, summarize_rank
from gpuscope.analyzers.serving.captures import with_captures
from gpuscope.analyzers.serving.report import live_advice, serving_report
from gpuscope.model.cost import JobSpec, Price
from gpuscope.model.errors import analysis_stage
from gpuscope.model.gpu_spec import GpuSpec
from gpuscope.model.rank import RankReport
from gpuscope.model.report import GpuSummary, Report, RunSummary
from gpuscope.model.run import Run
from gpuscope.model.serving import CapturedGraph
from gpuscope.model.trace import reader_lines


@dataclass(frozen=True)
class AnalysisOptions:
    price: Price | None = None
    job: JobSpec = field(default_factory=JobSpec)
    spec: GpuSpec | None = None
    """The run's GPU in the spec table (``gpuscope.specs``): its peaks give MFU and the roofline; None: n/a."""
    spec_note: str | None = None
    """Why ``spec`` is None where the GPU's name could be more than one model ("NVIDIA H100"): none is guessed."""
    target_mfu: float | None = None
    """The attainable MFU the cost section prices the gap to; None: ``model.efficiency.DEFAULT_TARGET_MFU``."""
    target_mfu_source: str | None = None
    """Where ``target_mfu`` was set (``gpuscope.specs.resolve_target_mfu``)."""
    capabilities: Capabilities = unknown_capabilities
    """What each GPU model supports (bf16, fp8, ...), for the cheaper GPU a job may move to; knows none by
    default, so only jobs in fp32 alone are offered one."""
    captures: tuple[CapturedGraph, ...] = ()
    """CUDA/HIP graph captures (``traces.capture``) whose operators the run's graph replays are given to."""


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
    summaries: list[RankSummary] = []
    if ranks is not None and not all(isinstance(r, RankSummary) for r in ranks):
        reports = tuple(r for r in ranks if isinstance(r, RankReport))
    else:
        summaries = [r for r in ranks if isinstance(r, RankSummary)] if ranks is not None else [
            summarize_rank(t) for t in run.traces]
        reports, evidence = tuple(s.report for s in summaries), tuple(s.evidence for s in summaries)
    live_summary = live.summarize(run)
    across = across_ranks([s.timeline for s in summaries], reports, job_facts(reports, live_summary, {}))
    worst = worst_straggler(across, reports) if across is not None else None
    diagnosis = verdict.diagnose(run, reports, live_summary, evidence=evidence,
                                 stragglers=None if across is None else tuple(s for s in (worst,) if s is not None))
    if across is not None:
        diagnosis = replace(diagnosis, verdict=named_straggler(diagnosis.verdict, diagnosis.shares,
                                                               across.stragglers, len(reports)))
    facts = diagnosis.facts or job_facts(reports, live_summary, {})
    # MFU divides by the facts' one step time (the mean of every steady step, an outlier included), and its FLOPs
    # per step are taken over the same steps: none left out.
    eff = run_efficiency(reports, facts, options.spec, run.meta.gpu_model, target_mfu=options.target_mfu,
                         target_source=options.target_mfu_source, spec_note=options.spec_note)
    facts = efficiency_facts(facts, eff)
    diagnosis = replace(diagnosis, facts=facts,
                        recommendations=(*diagnosis.recommendations, *efficiency_recommendations(eff)))
    cost_report, recommendations = cost.assess(run, reports, live_summary, diagnosis, options.price, options.job,
                                               capabilities=options.capabilities)
    cost_report = mfu_gap(cost_report, eff)
    serving = with_captures(serving_report(run, reports, cost_report, facts), options.captures)
    recommendations = (*recommendations, *live_advice(serving, cost_report))
    shares_of = diagnosis.rank_shares
    report = Report(
        run=run_summary(run),
        ranks=tuple(replace(r, stage_shares=shares_of[r.rank]) if r.rank in shares_of else r for r in reports),
        verdict=diagnosis.verdict,
        findings=diagnosis.findings,
        recommendations=recommendations,
        cost=cost_report,
        live=live_summary,
        warnings=(*warnings, *(line for line in reader_lines(run.traces) if line not in warnings),
                  *live.stop_lines(live_summary),
                  *(serving.metrics.warnings if serving is not None and serving.metrics is not None else ())),
        stage_shares=dict(diagnosis.shares.shares) if diagnosis.shares is not None else {},
        facts=facts,
        efficiency=eff,
        stragglers=priced(across, reports, cost_report.usd_per_gpu_hour if cost_report is not None else None,
                          facts.steady_steps) if across is not None else (),
        arrivals=across.arrivals if across is not None else None,
        outlier_steps=cost.priced_outliers(diagnosis.outlier_steps, cost_report),
        serving=serving,
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
