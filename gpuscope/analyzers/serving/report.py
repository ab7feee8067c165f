"""``Report.serving`` of a run: the phases of its traces' ranks joined, their graph replays, and with
``--serving-metrics`` the server's metrics over the recording, priced at the run's own GPU cost.

Phases over ranks: each phase's time, steps and GPU busy time are summed over the ranks, so ``share`` is the
phase's part of all classified step time, ``step_time_us`` its mean step and ``gpu_busy`` its busy time over its
time; ``steps`` is per rank (the ranks of one tensor-parallel server run the same steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from gpuscope.analyzers.serving import advice
from gpuscope.analyzers.serving.metrics import from_samples, priced
from gpuscope.model.cost import CostReport
from gpuscope.model.diagnosis import JobFacts, Recommendation
from gpuscope.model.rank import RankReport
from gpuscope.model.redact import about
from gpuscope.model.run import Run
from gpuscope.model.serving import PHASES, Engine, GraphReplay, PhaseStats, ServingPhase, ServingReport

HOST_BOUND_BUSY = 0.5
"""A phase whose GPU is busy under half its time waits on the host (launches, scheduling, syncs)."""
URL_TAG, ENGINE_TAG = "serving.url", "serving.engine"
"""The run's tags a recording with ``--serving-metrics`` keeps: the endpoint (without credentials) and its engine."""
_ENGINES: tuple[Engine, ...] = ("vllm", "sglang", "tgi")


def serving_report(run: Run, ranks: Sequence[RankReport], cost: CostReport | None,
                   facts: JobFacts | None) -> ServingReport | None:
    """The run's serving section; None when it has no serving metrics, phases or graph replays."""
    phases, phase_source = job_phases(ranks)
    graphs = _graphs(ranks)
    tag = run.meta.tags.get(ENGINE_TAG)
    engine = next((e for e in _ENGINES if e == tag), None)
    metrics = from_samples(run.samples, engine)
    source = run.meta.tags.get(URL_TAG)
    if metrics is not None:
        metrics = priced(metrics, usd_per_hour=_usd_per_hour(cost), watts=_watts(cost),
                         gpu_busy=facts.gpu_busy if facts is not None else None)
        where = f"serving metrics at {source}" if source else "serving metrics"
        metrics = replace(metrics, warnings=tuple(about(where, w) for w in metrics.warnings))
    if metrics is None and not phases and not graphs:
        return None
    return ServingReport(metrics=metrics, source=source, phases=phases, phase_source=phase_source,
                         graphs=graphs)


def live_advice(serving: ServingReport | None, cost: CostReport | None) -> tuple[Recommendation, ...]:
    """The serving advice of a recorded server, priced at the run's cost."""
    if serving is None or serving.metrics is None:
        return ()
    total = cost.own_usd if cost is not None and cost.own_usd is not None else (
        cost.total_usd if cost is not None else None)
    return tuple(advice.advise(serving.metrics, who="The server", cost_usd=total,
                               busy_metric="GPU busy, from NVML/DCGM utilisation"))


def job_phases(ranks: Sequence[RankReport]) -> tuple[dict[str, ServingPhase], str | None]:
    """Each phase over all ranks (see the module's docstring), and how the steps were told apart."""
    sums: dict[str, list[PhaseStats]] = {}
    sources = set()
    for r in ranks:
        if r.serving is None:
            continue
        sources.add(r.serving.phase_source)
        for name, stats in r.serving.phases.items():
            sums.setdefault(name, []).append(stats)
    everything = sum(s.span_us for parts in sums.values() for s in parts)
    out: dict[str, ServingPhase] = {}
    for name in PHASES:
        parts = sums.get(name)
        if not parts or everything <= 0:
            continue
        span, busy, steps = sum(p.span_us for p in parts), sum(p.busy_us for p in parts), sum(p.steps for p in parts)
        wait = sum(p.gpu_wait_us for p in parts)
        tokens = [p.tokens for p in parts]
        gpu_busy = busy / span if span > 0 else None
        out[name] = ServingPhase(
            share=span / everything, steps=round(steps / len(parts)), step_time_us=span / steps,
            gpu_busy=gpu_busy, bottleneck=_bottleneck(span, busy, wait) if span > 0 else None,
            tokens_per_step=sum(t for t in tokens if t is not None) / steps if None not in tokens else None,
            gpu_wait=wait / span if span > 0 else None)
    known = sorted(s for s in sources if s is not None)
    return out, ("+".join(known) or None) if out else None


def _bottleneck(span_us: float, busy_us: float, wait_us: float) -> Literal["gpu", "host", "gpu_wait"]:
    """What holds a phase's GPU back: itself when busy half the time or more; else the GPU-side wait when it is half
    the idle time or more (no change on the host gives that back); else the host."""
    if busy_us >= HOST_BOUND_BUSY * span_us:
        return "gpu"
    return "gpu_wait" if wait_us >= (span_us - busy_us) / 2 else "host"


def _graphs(ranks: Sequence[RankReport]) -> tuple[GraphReplay, ...]:
    with_graphs = [r for r in ranks if r.serving is not None and r.serving.graphs]
    if len(with_graphs) == 1:
        return with_graphs[0].serving.graphs if with_graphs[0].serving is not None else ()
    return tuple(replace(g, name=f"rank {r.rank} {g.name}")
                 for r in with_graphs if r.serving is not None for g in r.serving.graphs)


def _hours(cost: CostReport | None) -> float | None:
    """The run's wall time in hours: its GPU-hours over its GPUs."""
    if cost is None or not cost.gpu_count or cost.gpu_hours <= 0:
        return None
    return cost.gpu_hours / cost.gpu_count


def _usd_per_hour(cost: CostReport | None) -> float | None:
    """The run's own GPU cost per hour (its part of a shared GPU where it shared one)."""
    hours = _hours(cost)
    if cost is None or hours is None:
        return None
    total = cost.own_usd if cost.own_usd is not None else cost.total_usd
    return total / hours if total is not None else None


def _watts(cost: CostReport | None) -> float | None:
    hours = _hours(cost)
    if cost is None or hours is None or cost.energy_kwh is None:
        return None
    return cost.energy_kwh * 1000 / hours
