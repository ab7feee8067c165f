"""One rank reduced to what a report needs of it, where the rank is read: its RankReport, the diagnosis's trace
evidence, the facts of the run's catalog entry (time span, GPUs) and its collectives' timeline (at most
``MAX_COLLECTIVES`` of them). A thousand of these fit in some tens of MB, so the process that builds the report holds
no rank's events, however many ranks there are.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpuscope.analyzers.across.timeline import CollectiveTimeline, collective_timeline
from gpuscope.analyzers.diagnosis.evidence import TraceEvidence, trace_evidence
from gpuscope.analyzers.efficiency.count import count_rank
from gpuscope.analyzers.serving.rank import rank_serving, with_graph_work
from gpuscope.analyzers.trace import breakdown
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.analyzers.trace.startup import plan_steps
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.rank import RankReport
from gpuscope.model.trace import GPU_KINDS, RankTrace


@dataclass(frozen=True)
class RankFacts:
    """What the run's catalog entry takes from one rank's trace."""

    source: str
    started_ns: int | None
    """The epoch times of the first event's start and the last event's end, as the reader of the file worked
    them out (``gpuscope.traces.identity.recorded_span_ns``); None when the trace cannot say."""
    ended_ns: int | None
    gpus: tuple[GpuInfo, ...]
    """Each device the rank ran GPU work on, as its deviceProperties entry where the trace has one; none for a
    trace with no GPU activity (``RankTrace.gpu_active``)."""
    gpu_from_rank: bool = False
    """No device is known: ``gpus`` is one GPU numbered as the rank (and renumbered with it)."""
    content_sha256: str = ""
    """The file's content hash (``RankTrace.content_sha256``); empty when unknown."""


@dataclass(frozen=True)
class RankSummary:
    """One rank, reduced: all the report, the diagnosis and the run's catalog entry read of its trace."""

    report: RankReport
    evidence: TraceEvidence
    facts: RankFacts
    timeline: CollectiveTimeline | None = None
    """Its collectives, for matching with the other ranks'; None when it ran none in its steady steps."""


def summarize_rank(trace: RankTrace, *, recorded_ns: tuple[int, int] | None = None) -> RankSummary:
    """The rank's analysis and evidence, sharing one step plan and one set of role intervals; ``recorded_ns``:
    the epoch times the trace spans, where the reader knows them. Graph replays whose kernels the profiler did not
    record are GPU work first (``serving.graphs.with_graph_work``), so no view counts them idle."""
    trace, estimated_graph_us = with_graph_work(trace)
    plan = plan_steps(trace)
    roles = breakdown.roles(trace)
    report = replace(analyze_rank(trace, plan=plan, roles=roles), efficiency=count_rank(trace, plan))
    return RankSummary(report=replace(report, serving=rank_serving(trace, estimated_graph_us=estimated_graph_us)),
                       evidence=trace_evidence(trace, plan=plan, roles=roles),
                       facts=rank_facts(trace, recorded_ns=recorded_ns),
                       timeline=collective_timeline(trace, plan, roles))


def renumbered(summary: RankSummary, rank: int) -> RankSummary:
    """The same rank under another number (files that do not say which rank they are get numbered in name
    order once all are read); nothing else in a summary depends on the number."""
    if rank == summary.report.rank:
        return summary
    facts = summary.facts
    if facts.gpu_from_rank:
        facts = replace(facts, gpus=(GpuInfo(index=rank),))
    return RankSummary(report=replace(summary.report, rank=rank), evidence=replace(summary.evidence, rank=rank),
                       facts=facts, timeline=summary.timeline.renumbered(rank) if summary.timeline else None)


def rank_facts(trace: RankTrace, *, recorded_ns: tuple[int, int] | None = None) -> RankFacts:
    started, ended = recorded_ns if recorded_ns is not None else (None, None)
    gpus, from_rank = _rank_gpus(trace)
    return RankFacts(source=trace.source, started_ns=started, ended_ns=ended, gpus=gpus, gpu_from_rank=from_rank,
                     content_sha256=trace.content_sha256)


def _rank_gpus(trace: RankTrace) -> tuple[tuple[GpuInfo, ...], bool]:
    if not trace.gpu_active:  # a CPU process: no GPU to count or price, whatever deviceProperties lists
        return (), False
    ev = trace.events
    used = np.unique(ev.device[ev.mask(*GPU_KINDS) & (ev.device >= 0)]).tolist()
    if len(used) <= 1:
        gpu = trace.main_gpu()
        if gpu is not None:
            return (gpu,), False
        index = trace.main_device
        return (GpuInfo(index=index if index is not None else trace.rank),), index is None
    listed = {g.index: g for g in trace.gpus}
    return tuple(listed.get(d, GpuInfo(index=d)) for d in used), False
