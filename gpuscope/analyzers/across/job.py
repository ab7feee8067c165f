"""The job's ranks side by side: their collectives matched, the stragglers found and priced, and what the verdict
and the communication rules are told of the worst one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpuscope.analyzers.across.match import match
from gpuscope.analyzers.across.stragglers import Assessment, assess
from gpuscope.analyzers.across.timeline import CollectiveTimeline
from gpuscope.analyzers.diagnosis.facts import job_steps
from gpuscope.analyzers.diagnosis.stragglers import Straggler, per_step_comm_us
from gpuscope.model.across import StragglerRank
from gpuscope.model.diagnosis import JobFacts
from gpuscope.model.rank import RankReport

US_PER_HOUR = 3.6e9


def across_ranks(timelines: Sequence[CollectiveTimeline | None], ranks: Sequence[RankReport],
                 facts: JobFacts) -> Assessment | None:
    """The job's collectives matched across ranks and what they show; None when fewer than two ranks share one.

    Per-step figures are over the job's steady steps, outlier steps included (their collectives are counted too);
    collectives of the other (warm-up) steps are left out. A trace without profiler steps counts its steady window
    as one step."""
    lines = [t for t in timelines if t is not None]
    named = {records[0].name for records in job_steps(ranks)}
    matched = match(lines, named or None)
    if matched is None:
        return None
    steps = len(named) or facts.steady_steps or 1  # the steps whose collectives are summed, outliers too
    if any(t.truncated for t in lines):
        steps = min(t.steps for t in lines)
    spans = [r.span_us for r in ranks if r.span_us > 0]
    step_us = facts.step_time_us or (sum(spans) / len(spans) if spans else None)
    return assess(matched, step_us=step_us, steps=steps, devices={r.rank: r.device for r in ranks})


def priced(assessment: Assessment, ranks: Sequence[RankReport], usd_per_gpu_hour: float | None,
           steps: int) -> tuple[StragglerRank, ...]:
    """The stragglers with ``usd``: the other ranks' GPU time spent waiting for each over this run's ``steps`` (each
    waiting rank's GPUs), at the run's price; None without a price."""
    if usd_per_gpu_hour is None:
        return assessment.stragglers
    gpus = {r.rank: r.gpu_count for r in ranks}
    return tuple(replace(s, usd=sum(us * gpus.get(rank, 1) for rank, us in waits) * max(steps, 1) / US_PER_HOUR
                         * usd_per_gpu_hour)
                 for s, waits in zip(assessment.stragglers, assessment.waits_us))


def worst_straggler(assessment: Assessment, ranks: Sequence[RankReport]) -> Straggler | None:
    """The worst straggler in the form the communication rules and the verdict's sentence read."""
    if not assessment.stragglers:
        return None
    top, waits = assessment.stragglers[0], assessment.waits_us[0]
    by_rank = {r.rank: r for r in ranks}
    me = by_rank.get(top.rank)
    worst_rank, worst_us = max(waits, key=lambda w: w[1])
    shares = [us / by_rank[rank].span_us for rank, us in waits if rank in by_rank and by_rank[rank].span_us > 0]
    return Straggler(rank=top.rank, comm_us=per_step_comm_us(me) if me is not None else 0.0, wait_us=waits,
                     mean_wait_us=top.wait_caused_us, max_wait_rank=worst_rank, max_wait_us=worst_us,
                     mean_wait_share=sum(shares) / (len(waits) + 1), late_share=top.late_share, cause=top.cause)
