"""The verdict: which stage holds the GPUs back, in the user's words, with findings and what to change.

Stage shares (stages.py) say how much of the step each stage accounts for. The stall stages
(data loading, host overhead, communication, memory, idle) are what keep a GPU from working; the
largest of them is the verdict when it holds at least ``STALL_MIN`` of the step. Otherwise the GPU
itself is the limit (``gpu_compute``: the healthy case, where hints make kernels faster).

Confidence is the product of three things: the margin over the runner-up and the distance from the
threshold (``choose``), the share of the steady steps (over all ranks) whose own shares name the same stage,
and how much evidence there is: n / (n + 1) for n steady rank-steps (a single step gives at most 50%), or for
a live run without a trace, n seconds sampled. The verdict's sentence is worded by it (``summary.hedge``).
A run that saw no GPU gets no GPU stage: its verdict is a host-side account of where the time went.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from gpuscope.analyzers.advice.vendor import collectives, job_vendor, words
from gpuscope.analyzers.diagnosis import codes, savings
from gpuscope.analyzers.diagnosis.context import Context, no_gpu_seen
from gpuscope.analyzers.diagnosis.evidence import TraceEvidence, trace_evidence
from gpuscope.analyzers.diagnosis.facts import job_facts
from gpuscope.analyzers.diagnosis.outliers import outlier_steps
from gpuscope.analyzers.diagnosis.rules import comm as rules_comm
from gpuscope.analyzers.diagnosis.rules import data as rules_data
from gpuscope.analyzers.diagnosis.rules import gpu as rules_gpu
from gpuscope.analyzers.diagnosis.rules import gpu_wait as rules_gpu_wait
from gpuscope.analyzers.diagnosis.rules import host as rules_host
from gpuscope.analyzers.diagnosis.rules import memory as rules_memory
from gpuscope.analyzers.diagnosis.rules import serving as rules_serving
from gpuscope.analyzers.diagnosis.rules import sharing as rules_sharing
from gpuscope.analyzers.diagnosis.rules import steps as rules_steps
from gpuscope.analyzers.diagnosis.rules import trace as rules_trace
from gpuscope.analyzers.diagnosis.stages import (
    STALLS,
    StageShares,
    combine,
    live_shares,
    rank_shares,
    trace_shares,
)
from gpuscope.analyzers.diagnosis.stragglers import Straggler, find_straggler
from gpuscope.analyzers.diagnosis.summary import hedged, no_gpu_sentence, summary
from gpuscope.analyzers.diagnosis.typical import outlier_names, typical_evidence, typical_rank
from gpuscope.analyzers.efficiency.pipes import mean_use, pipe_use
from gpuscope.model.diagnosis import Finding, JobFacts, OutlierStep, Recommendation, Resource, Stage, Verdict
from gpuscope.model.live import LiveSummary
from gpuscope.model.rank import RankReport
from gpuscope.model.run import Run

STALL_MIN = 0.15
"""A stall that holds 15% of the step or more names the verdict."""
SECONDARY_MIN = 0.10
MIN_SAVING = 0.005
"""A recommendation whose modelled saving is under half a percent of the step is left out (its finding stays)."""
COMPUTE_HEALTHY = 0.5
RULES = (rules_data.apply, rules_host.apply, rules_comm.apply, rules_memory.apply, rules_gpu.apply,
         rules_gpu_wait.apply, rules_trace.apply, rules_serving.apply, rules_sharing.apply)
_RESOURCE: dict[Stage, Resource] = {"host_overhead": "cpu", "communication": "nccl", "memory": "memory",
                                    "gpu_compute": "gpu", "idle": "gpu", "data_loading": "unknown"}
NO_VERDICT = "Not enough evidence in this run to name a bottleneck."
_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
HOST_RECOMMENDATIONS = frozenset({codes.DATALOADER_NUM_WORKERS, codes.DATALOADER_PREFETCH, codes.PERSISTENT_WORKERS,
                                  codes.STORAGE_FORMAT, codes.FASTER_LOADING, codes.DDP_BUCKET, codes.GRAD_ACCUMULATION,
                                  codes.GRADIENT_COMPRESSION, codes.STRAGGLER, codes.ASYNC_CHECKPOINT,
                                  codes.SMOOTH_STEPS})
"""What a run without a GPU may still be told: loader and collective advice that holds on a CPU too.
Every other recommendation (batch size, CUDA graphs, syncs, AMP, pinned copies, GPU decode, ...)
assumes a GPU; an allowlist keeps a new GPU rule from leaking into CPU-only advice."""


@dataclass(frozen=True)
class Diagnosis:
    """The verdict of a run with its findings and recommendations (est_saving_usd left to the cost model)."""

    verdict: Verdict
    findings: tuple[Finding, ...] = ()
    recommendations: tuple[Recommendation, ...] = ()
    shares: StageShares | None = None
    """The stage shares the verdict was chosen from (None when nothing could tell)."""
    facts: JobFacts | None = None
    """The job-level figures the rules quoted (``Report.facts``); None in a Diagnosis built by hand."""
    outlier_steps: tuple[OutlierStep, ...] = ()
    """The job's outlier steps (``Report.outlier_steps``), not yet priced."""
    rank_shares: dict[int, dict[Stage, float]] = field(default_factory=dict)
    """Each rank's stage shares of its typical step, by rank (``RankReport.stage_shares``)."""


def diagnose(run: Run, ranks: Sequence[RankReport], live: LiveSummary | None,
             evidence: Sequence[TraceEvidence] | None = None,
             stragglers: Sequence[Straggler] | None = None) -> Diagnosis:
    """Name what held the GPUs back in ``run``, from its per-rank analyses and (when present) live samples.

    ``evidence``: ``trace_evidence`` of each of ``ranks`` (same order), where it was computed with them;
    without it, it is computed here from ``run.traces``. ``stragglers``: the stragglers found by matching the
    ranks' collectives (worst first; empty when none stands out); None where they were not matched, and a straggler
    is then looked for from communication durations alone."""
    if evidence is None:
        by_rank = {t.rank: t for t in run.traces}
        pairs = [(r, by_rank[r.rank]) for r in ranks if r.rank in by_rank]
        evidence = tuple(trace_evidence(t) for _, t in pairs)
        with_trace = tuple(r for r, _ in pairs)
    else:
        with_trace, evidence = tuple(ranks), tuple(evidence)
    if with_trace and live is None and all(r.startup is not None and not r.startup.steady for r in with_trace):
        return _startup_only(with_trace)
    skipped = outlier_names(with_trace)
    trace, per_rank = _typical_shares(with_trace, evidence, skipped)
    shares = combine(trace, live_shares(live) if live is not None else None)
    facts = job_facts(ranks, live, shares.shares if shares is not None else {})
    outliers = outlier_steps(ranks, facts.typical_step_us)
    library = collectives(job_vendor(ranks, run.meta.gpus), {e.backend for e in evidence if e.backend})
    if shares is None:
        no_gpu = no_gpu_seen(run, ranks, live)
        steps_out = rules_steps.apply(ranks, outliers, facts)
        return Diagnosis(verdict=Verdict(primary=None, resource="unknown",
                                         summary=f"{no_gpu_sentence(live=live is not None)} {NO_VERDICT}"
                                         if no_gpu else NO_VERDICT, collectives=library),
                         findings=steps_out.findings, recommendations=ordered(steps_out.recommendations),
                         facts=facts, outlier_steps=outliers)
    ctx = Context(run=run, ranks=with_trace, evidence=evidence, live=live, shares=shares, facts=facts,
                  straggler=find_straggler(with_trace) if stragglers is None else next(iter(stragglers), None),
                  skipped_steps=skipped)
    out = rules_steps.apply(ranks, outliers, facts)
    for rule in RULES:
        out += rule(ctx)
    served = rules_serving.adapt(ctx, _dedupe(out.recommendations))
    recs = tuple(r for r in savings.cap_stacked(_dedupe(served), shares.shares)
                 if (r.est_step_saving is None or r.est_step_saving >= MIN_SAVING)
                 and (not ctx.no_gpu or r.code in HOST_RECOMMENDATIONS))
    kept = {r.code for r in recs}
    verdict = replace(_verdict(ctx), collectives=library)
    findings = tuple(sorted((replace(f, recommendations=tuple(c for c in f.recommendations if c in kept))
                             for f in out.findings),
                            key=lambda f: (_SEVERITY_ORDER[f.severity], -(f.time_share or 0.0))))
    return Diagnosis(verdict=verdict, findings=findings, recommendations=ordered(recs), shares=shares, facts=facts,
                     outlier_steps=outliers, rank_shares=per_rank)


def _typical_shares(ranks: Sequence[RankReport], evidence: Sequence[TraceEvidence], skipped: frozenset[str]
                    ) -> tuple[StageShares | None, dict[int, dict[Stage, float]]]:
    """The job's stage shares from its traces and each rank's, over the job's typical steps: the outlier steps
    (``skipped``) are left out, so they move neither the shares nor the verdict."""
    views = [typical_rank(r, skipped) for r in ranks]
    typical_ev = [typical_evidence(e, r, skipped) for e, r in zip(evidence, ranks)]
    per_rank = {v.rank: rank_shares(v, e) for v, e in zip(views, typical_ev) if v.gpu_busy is not None}
    return trace_shares(views, typical_ev), {k: v for k, v in per_rank.items() if v}


def _startup_only(ranks: Sequence[RankReport]) -> Diagnosis:
    """A trace of start-up alone (CUDA-graph capture, first-call initialisation): no stage to name."""
    f = rules_trace.startup_finding(ranks)
    assert f is not None
    rec = rules_trace.schedule_recommendation(words(job_vendor(ranks)))
    verdict = Verdict(primary=None, resource="unknown", evidence=dict(f.evidence),
                      summary=f"{f.title}: a one-time cost, not the job's steady state. Profile later steps to "
                              "see what holds the job back.")
    return Diagnosis(verdict=verdict, findings=(f,), recommendations=(rec,))


def ordered(recs: Sequence[Recommendation], base_usd: float | None = None) -> tuple[Recommendation, ...]:
    """What saves step time first, largest first; then what saves only dollars (a cheaper GPU, a MIG slice), by its
    dollars over ``base_usd``; those that save neither (making room in memory) last, in rule order.

    A GPU swap never ranks above a measured stall, whatever its dollars: the stall is why the GPU looks idle
    enough to swap, a slower GPU keeps it, and once it is fixed the GPU is busier than the swap assumed."""
    def key(r: Recommendation) -> tuple[int, float]:
        if r.est_step_saving is not None:
            return 0, -r.est_step_saving
        if r.est_saving_usd is not None and base_usd:
            return 1, -r.est_saving_usd / base_usd
        return 2, 0.0
    return tuple(sorted(recs, key=key))


def choose(shares: StageShares) -> tuple[Stage | None, float]:
    """The primary stage and the confidence in it, from the stage shares alone."""
    known = {st: x for st, x in shares.shares.items() if x is not None}
    if not known:
        return None, 0.0
    stalls = sorted(((known.get(st, 0.0), st) for st in STALLS), reverse=True)
    (top, stage), (runner_up, _) = stalls[0], stalls[1]
    compute = known.get("gpu_compute")
    if top >= STALL_MIN or (compute is None and top > 0):
        margin = 1.0 - runner_up / top if top > 0 else 0.0
        return stage, _clamp(margin * min(1.0, top / (2 * STALL_MIN)))
    if compute is None:
        return None, 0.0
    healthy = _clamp((compute - COMPUTE_HEALTHY) / 0.4) if compute >= COMPUTE_HEALTHY else 0.0
    return "gpu_compute", _clamp(healthy * (1.0 - top / STALL_MIN))


def _verdict(ctx: Context) -> Verdict:
    primary, margin = choose(ctx.shares)
    if ctx.no_gpu:
        return _host_verdict(ctx, primary)
    if primary is None:
        return Verdict(primary=None, resource="unknown", summary=NO_VERDICT)
    resource, why = rules_data.loader_resource(ctx) if primary == "data_loading" else (_RESOURCE[primary], "")
    secondary = tuple(st for st in sorted(STALLS, key=lambda s: -ctx.shares.get(s))
                      if st != primary and ctx.shares.get(st) >= SECONDARY_MIN)
    agree, samples = support(ctx, primary)
    confidence = _clamp(margin * (agree / samples if samples else 1.0) * _weight(samples, ctx))
    evidence = _evidence(ctx)
    evidence["supporting_steps"] = f"{agree} of {samples}" if samples else None
    return Verdict(primary=primary, resource=resource, secondary=secondary, confidence=confidence,
                   evidence=evidence,
                   summary=hedged(ctx, primary, confidence, samples, summary(ctx, primary, why)))


def _evidence(ctx: Context) -> dict[str, float | int | str | None]:
    evidence: dict[str, float | int | str | None] = {f"{st}_share": ctx.shares.shares.get(st)
                                                     for st in (*STALLS, "gpu_compute")}
    evidence["gpu_busy"] = ctx.facts.gpu_busy
    if ctx.live is not None and ctx.live.gpus:  # DCGM's SM and tensor-pipe activity side by side; n/a unscraped
        use = mean_use(pipe_use(g.sm_active_mean, g.tensor_active_mean) for g in ctx.live.gpus)
        evidence["sm_busy"] = use.sm_active
        evidence["tensor_pipe_busy"] = use.tensor_active
    evidence["step_time_us"] = ctx.step_time_us
    evidence["ranks"] = len(ctx.ranks)
    evidence["sources"] = ", ".join(ctx.shares.sources)
    if ctx.straggler is not None:
        evidence["straggler_rank"] = ctx.straggler.rank
    return evidence


HOST_STAGES: tuple[Stage, ...] = ("data_loading", "host_overhead", "communication")
"""What a run without a GPU may be told held it back: the host's own time, never a GPU stage."""


def _host_verdict(ctx: Context, primary: Stage | None) -> Verdict:
    """A run that saw no GPU: no GPU stage and no GPU resource, but where the host's time went (main thread asleep,
    loading, or busy in Python); the stage is kept only when it is a host-side one."""
    if primary is None:
        return Verdict(primary=None, resource="unknown",
                       summary=f"{no_gpu_sentence(live=ctx.live is not None)} {NO_VERDICT}")
    host_primary = primary if primary in HOST_STAGES else None
    resource: Resource = "unknown"
    why = ""
    if primary == "data_loading":
        resource, why = rules_data.loader_resource(ctx)
    elif primary in ("host_overhead", "communication"):
        resource = "cpu" if primary == "host_overhead" else "nccl"
    return Verdict(primary=host_primary, resource=resource, confidence=0.0, evidence=_evidence(ctx),
                   summary=summary(ctx, primary, why))


def support(ctx: Context, primary: Stage) -> tuple[int, int]:
    """(agreeing, all) typical rank-steps: the steps whose own stage shares name ``primary`` too.

    Each steady step that is not an outlier is weighed like its rank's mean step (``stages.rank_shares`` on the
    step's own breakdown), with the rank's collective waits and idle gaps; a trace without profiler steps counts
    its steady window as one."""
    agree = total = 0
    for r, ev in zip(ctx.ranks, ctx.evidence):
        steps = [s for s in r.per_step if not s.warmup and s.name not in ctx.skipped_steps]
        views = [replace(r, step_time_us=s.duration_us, step_breakdown_us=s.breakdown_us) for s in steps] or [r]
        for view in views:
            shares = rank_shares(view, ev)
            if not shares:
                continue
            total += 1
            agree += _names(shares, primary)
    return agree, total


def _names(shares: dict[Stage, float], primary: Stage) -> bool:
    top_share, top = max((shares.get(st, 0.0), st) for st in STALLS)
    if primary == "gpu_compute":
        return top_share < STALL_MIN
    return top == primary or (primary == "idle" and top == "host_overhead")


def _weight(samples: int, ctx: Context) -> float:
    """n / (n + 1): n steady rank-steps of a trace, or seconds sampled by a live run without one."""
    n = float(samples) if samples else (ctx.live.duration_s if ctx.live is not None else 0.0)
    return n / (n + 1.0) if n > 0 else 0.0


def _dedupe(recs: Sequence[Recommendation]) -> tuple[Recommendation, ...]:
    """One recommendation per code: the first rule to give it wins."""
    seen: dict[str, Recommendation] = {}
    for r in recs:
        seen.setdefault(r.code, r)
    return tuple(seen.values())


def _clamp(x: float) -> float:
    return min(max(x, 0.0), 1.0)
