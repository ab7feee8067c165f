"""What a run cost, how much of it bought nothing (by cause), what each fix saves, and its energy.

Pure: everything comes in as arguments (the price is resolved by the caller). docs/cost.md gives the
definitions; in short, for a trace each rank is one GPU for its window, and the waste split is the
rank's step-time breakdown (which adds up to the step by construction), so waste never exceeds the
total and its parts add up to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

from gpuscope.analyzers.advice import gpu_swap
from gpuscope.analyzers.advice.gpu_swap import Capabilities, unknown_capabilities
from gpuscope.analyzers.advice.vendor import job_vendor
from gpuscope.analyzers.diagnosis import codes
from gpuscope.analyzers.diagnosis.facts import job_facts
from gpuscope.analyzers.diagnosis.rules.steps import outlier_share
from gpuscope.analyzers.diagnosis.stages import STALLS, StageShares
from gpuscope.analyzers.diagnosis.verdict import Diagnosis, ordered
from gpuscope.analyzers.energy import run_energy_j
from gpuscope.analyzers.slices import slice_recommendation, smallest_slice
from gpuscope.model.cost import CostReport, JobSpec, Price, WasteSplit, gpu_time
from gpuscope.model.diagnosis import JobFacts, OutlierStep, Recommendation
from gpuscope.model.live import LiveSummary
from gpuscope.model.rank import RankReport
from gpuscope.model.run import Run

US_PER_HOUR = 3.6e9
NS_PER_S = 1e9
J_PER_KWH = 3.6e6
NO_PRICE = ("No price was given for this run's GPUs: set one with --usd-per-gpu-hour, "
            "GPUSCOPE_USD_PER_GPU_HOUR, or [prices] in $GPUSCOPE_HOME/config.toml (see `gpuscope prices`).")
RIGHT_SIZE_HEADROOM = gpu_swap.HEADROOM
"""Peak memory x this must fit a smaller GPU's (or MIG slice's) nominal memory (allocator slack, usable < nominal)."""


@dataclass(frozen=True)
class WasteShares:
    """Fractions 0..1 of all the run's GPU-hours lost to each cause; None where a cause was not measurable."""

    idle: float | None = None
    data_loading: float | None = None
    host_overhead: float | None = None
    communication: float | None = None
    memory: float | None = None
    unattributed: float | None = None
    outlier_steps: float | None = None

    @property
    def total(self) -> float:
        parts: list[float | None] = [getattr(self, f.name) for f in fields(self)]
        return sum(v for v in parts if v is not None)


@dataclass(frozen=True)
class Usage:
    """What a run used, before any price: GPU-hours, how they were lost, and what right-sizing needs."""

    gpu_hours: float
    gpu_count: int
    waste: WasteShares | None = None
    step_gpu_hours: float | None = None
    """GPU-hours one step costs across all ranks; None without profiler steps."""
    peak_memory_bytes: int | None = None
    busy: float | None = None


def assess(run: Run, ranks: Sequence[RankReport], live: LiveSummary | None, diagnosis: Diagnosis,
           price: Price | None, job: JobSpec, *, capabilities: Capabilities = unknown_capabilities
           ) -> tuple[CostReport | None, tuple[Recommendation, ...]]:
    """The cost report of a run, and the diagnosis' recommendations with their dollar savings.

    ``capabilities``: what each GPU model supports, for the cheaper GPU a job may move to (``advice.gpu_swap``).
    Returns (None, recommendations unchanged) when the run's GPU-hours cannot be known
    (no ranks, or a live run without a duration or GPUs).
    """
    facts = diagnosis.facts or job_facts(ranks, live, diagnosis.shares.shares if diagnosis.shares else {})
    usage = run_usage(run, ranks, live, facts)
    if usage is None:
        return None, diagnosis.recommendations
    told = facts.outlier_threshold_us is not None
    usage = replace(usage, waste=stage_waste(diagnosis.shares, *outlier_time(ranks, diagnosis.outlier_steps, told)))
    usd_per_hour = price.usd_per_gpu_hour if price is not None else None
    report = cost_report(usage, usd_per_hour, job)
    energy_j, energy_source = run_energy_j(run.samples, [g.index for g in run.meta.gpus])
    energy_kwh = energy_j / J_PER_KWH if energy_j is not None else None
    grid = job.grid_kg_co2_per_kwh
    report = replace(
        report, price_source=price.source if price is not None else None,
        note=None if usd_per_hour is not None else (price.note if price is not None and price.note else NO_PRICE),
        energy_kwh=energy_kwh, energy_source=energy_source,
        co2_kg=energy_kwh * grid if energy_kwh is not None and grid is not None else None,
        grid_kg_co2_per_kwh=grid if energy_kwh is not None else None,
        grid_source=job.grid_source if energy_kwh is not None and grid is not None else None,
        gpu_share=price.gpu_share if price is not None else None,
        whole_usd_per_gpu_hour=price.whole_usd_per_gpu_hour if price is not None else None,
        gpu_share_basis=price.share_basis if price is not None else None,
    )
    shared = shared_gpu_usd(live, usd_per_hour)
    report = replace(report, held_usd=shared.held_usd, own_usd=shared.own_usd, own_basis=shared.own_basis,
                     neighbours_usd=shared.neighbours_usd)
    base_usd = report.projected_usd if report.projected_usd is not None else report.total_usd
    recommendations = tuple(with_saving(r, base_usd) for r in diagnosis.recommendations)
    swap = gpu_swap.cheaper_gpu(price, peak_memory_bytes=usage.peak_memory_bytes, busy=usage.busy,
                                needs=gpu_swap.job_needs(ranks), capabilities=capabilities,
                                vendor=job_vendor(ranks, run.meta.gpus))
    extra = (right_size(usage, swap, diagnosis, projected_gpu_hours(usage, job)),
             slice_fit(run, live, usage, price, projected_gpu_hours(usage, job)))
    return report, ordered(recommendations + tuple(r for r in extra if r is not None), base_usd)


def slice_fit(run: Run, live: LiveSummary | None, usage: Usage, price: Price | None,
              projected_hours: float | None) -> Recommendation | None:
    """On whole GPUs that could be split into MIG slices: the smallest slice the job fits, when one does. On a GPU
    the job shared, its own SM share and its own memory are what must fit."""
    if (price is None or price.usd_per_gpu_hour is None or price.gpu_share is not None or not price.mig_profiles
            or usage.busy is None or any(g.mig_profile for g in run.meta.gpus)):
        return None
    peak = usage.peak_memory_bytes
    if peak is None:
        return None
    profile = smallest_slice(usage.busy, peak, price, headroom=RIGHT_SIZE_HEADROOM)
    if profile is None:
        return None
    hours = projected_hours if projected_hours is not None else usage.gpu_hours
    shared = live is not None and any(s.shared for s in live.shares)
    what = "The job's own processes" if shared else "The job"
    return slice_recommendation(profile, price, busy=usage.busy, peak_memory_bytes=peak, gpus=usage.gpu_count,
                                hours=hours, what=what)


@dataclass(frozen=True)
class SharedUsd:
    """A shared GPU's dollars (``CostReport.held_usd`` and the rest); all None when the target shared none."""

    held_usd: float | None = None
    own_usd: float | None = None
    own_basis: str | None = None
    neighbours_usd: float | None = None


def shared_gpu_usd(live: LiveSummary | None, usd_per_gpu_hour: float | None) -> SharedUsd:
    """On GPUs the target shared with other processes: the GPUs' cost while it held them, its part of it
    (``GpuShare.cost_part``), and the part that bought the neighbours' kernels."""
    shared = [s for s in (live.shares if live is not None else ()) if s.shared]
    if not shared or usd_per_gpu_hour is None:
        return SharedUsd()
    held = [s.held_s / 3600 * usd_per_gpu_hour for s in shared]
    parts = [s.cost_part for s in shared]
    others = [s.others_sm_mean for s in shared]
    bases = {s.cost_basis for s in shared}
    return SharedUsd(
        held_usd=sum(held),
        own_usd=sum(h * p for h, p in zip(held, parts) if p is not None) if None not in parts else None,
        own_basis=bases.pop() if len(bases) == 1 else "mixed",
        neighbours_usd=sum(h * o for h, o in zip(held, others) if o is not None) if None not in others else None,
    )


def run_usage(run: Run, ranks: Sequence[RankReport], live: LiveSummary | None,
              facts: JobFacts | None = None) -> Usage | None:
    """A trace run is its ranks; a live run is its duration x GPUs, with profiled steps (when it
    recorded some) giving the per-step cost and, when utilization is unknown, the waste split.
    ``facts``: the job's facts (the diagnosis's), so step time, busy and peak memory are the report's."""
    facts = facts if facts is not None else job_facts(ranks, live, {})
    if run.meta.kind == "trace":
        return trace_usage(ranks, facts)
    usage = live_usage(run, live, facts)
    profiled = trace_usage(ranks, facts) if ranks else None
    if usage is None or profiled is None:
        return usage
    return replace(usage, step_gpu_hours=profiled.step_gpu_hours)


def cost_report(usage: Usage, usd_per_gpu_hour: float | None, job: JobSpec) -> CostReport:
    """GPU-hours priced: total, waste by cause, per step, and the whole job's projection."""
    hours = projected_gpu_hours(usage, job)
    basis = "job_hours" if job.job_hours is not None else ("job_steps" if hours is not None else None)
    waste_basis = "stage_shares" if usage.waste is not None else None
    if usd_per_gpu_hour is None:
        return CostReport(gpu_hours=usage.gpu_hours, usd_per_gpu_hour=None, price_source=None, total_usd=None,
                          wasted_usd=None, gpu_count=usage.gpu_count, waste_basis=waste_basis,
                          projection_basis=basis)
    total = usage.gpu_hours * usd_per_gpu_hour
    split, wasted = _priced_waste(usage.waste, total)
    per_step = usage.step_gpu_hours * usd_per_gpu_hour if usage.step_gpu_hours is not None else None
    projected = hours * usd_per_gpu_hour if hours is not None else None
    waste_fraction = wasted / total if wasted is not None and total > 0 else None
    return CostReport(
        gpu_hours=usage.gpu_hours, usd_per_gpu_hour=usd_per_gpu_hour, price_source=None, total_usd=total,
        wasted_usd=wasted, waste_by_cause_usd=split, per_step_usd=per_step,
        per_1k_steps_usd=per_step * 1000 if per_step is not None else None,
        per_1k_samples_usd=(per_step / job.samples_per_step * 1000
                            if per_step is not None and job.samples_per_step else None),
        projected_usd=projected, gpu_count=usage.gpu_count, waste_basis=waste_basis, projection_basis=basis,
        projected_wasted_usd=projected * waste_fraction if projected is not None and waste_fraction is not None
        else None,
    )


def _priced_waste(shares: WasteShares | None, total_usd: float) -> tuple[WasteSplit, float | None]:
    if shares is None:
        return WasteSplit(), None
    parts = {f.name: (v * total_usd if (v := getattr(shares, f.name)) is not None else None) for f in fields(shares)}
    return WasteSplit(**parts), shares.total * total_usd


def projected_gpu_hours(usage: Usage, job: JobSpec) -> float | None:
    """GPU-hours of the whole job: its length x the run's GPUs, else its steps x GPU-hours per step."""
    if job.job_hours is not None:
        return job.job_hours * usage.gpu_count
    if job.job_steps is not None and usage.step_gpu_hours is not None:
        return job.job_steps * usage.step_gpu_hours
    return None


def trace_usage(ranks: Sequence[RankReport], facts: JobFacts) -> Usage | None:
    """Each GPU a rank ran work on is one GPU for the rank's window (one per rank in most jobs; none for a rank
    that recorded no GPU activity). A step costs the
    job's step time (``JobFacts.step_time_us``) on every GPU: the ranks wait for the slowest at each step."""
    window_us = sum(r.window_us * r.gpu_count for r in ranks)
    gpus = sum(r.gpu_count for r in ranks)
    if window_us <= 0 or gpus == 0:  # a CPU job (no rank ran GPU work) has no GPU time to price
        return None
    step = facts.step_time_us if all(r.steps > 0 for r in ranks) else None
    return Usage(
        gpu_hours=window_us / US_PER_HOUR, gpu_count=gpus,
        step_gpu_hours=step * gpus / US_PER_HOUR if step else None,
        peak_memory_bytes=_job_peak(facts),
        busy=facts.gpu_busy if all(r.gpu_busy is not None for r in ranks) else None,
    )


def _job_peak(facts: JobFacts) -> int | None:
    """The worst peak, when it is the job's peak: every rank's known exactly (a lower bound, from an old trace
    without "Total Allocated", cannot show that a smaller GPU fits)."""
    return facts.peak_memory_bytes if facts.peak_memory_all_known and not facts.peak_memory_lower_bound else None


def outlier_time(ranks: Sequence[RankReport], outliers: Sequence[OutlierStep],
                 told: bool) -> tuple[float, float | None]:
    """(the outlier steps' time over the typical step, the part of it the GPU did not compute in), as shares of
    the run's GPU time. ``told``: the run has steps enough to tell outliers (none found is then 0, else None)."""
    total = outlier_share(ranks, outliers)
    if total is None:
        return 0.0, 0.0 if told else None
    stalled = outlier_share(ranks, [o for o in outliers if o.stage != "gpu_compute"]) or 0.0
    return total, stalled


def stage_waste(shares: StageShares | None, outliers: float = 0.0,
                outliers_wasted: float | None = None) -> WasteShares | None:
    """The run's GPU time lost to each cause: the stall stages' shares, the same numbers the verdict weighs.

    Each stall share is a part of the step in which the GPU did no useful work (gpu_compute is the work
    bought). Stage shares add up to at most 1; what they leave over, when gpu_compute is known, is GPU time
    not busy for a cause nothing measured (``unattributed``). The stage shares are of the typical step: when
    outlier steps took ``outliers`` of the run's time over it, the stages share the rest, and the part of that
    time the GPU did not compute in is waste of its own (``outliers_wasted``). So the parts add up to the waste,
    and the waste never exceeds the total.
    """
    if shares is None:
        return None
    s = shares.shares
    stalls = {st: s.get(st) for st in ("idle", "data_loading", "host_overhead", "communication", "memory")}
    if all(v is None for v in stalls.values()):
        return None
    typical = 1.0 - outliers
    compute = s.get("gpu_compute")
    rest = 1.0 - compute - sum(v for v in stalls.values() if v is not None) if compute is not None else None

    def part(x: float | None) -> float | None:
        return x * typical if x is not None else None
    return WasteShares(idle=part(stalls["idle"]), data_loading=part(stalls["data_loading"]),
                       host_overhead=part(stalls["host_overhead"]), communication=part(stalls["communication"]),
                       memory=part(stalls["memory"]),
                       unattributed=part(rest) if rest is None or rest > 1e-9 else 0.0,
                       outlier_steps=outliers_wasted)


def priced_outliers(outliers: Sequence[OutlierStep], cost: CostReport | None) -> tuple[OutlierStep, ...]:
    """Each outlier step with its extra time's dollars: the extra time on every GPU the run is charged for (the
    ranks wait for the slowest), at the run's price."""
    price = cost.usd_per_gpu_hour if cost is not None else None
    gpus = cost.gpu_count if cost is not None else None
    if price is None or not gpus:
        return tuple(outliers)
    return tuple(replace(o, extra_usd=max(o.extra_us, 0.0) * gpus / US_PER_HOUR * price) for o in outliers)


def live_usage(run: Run, live: LiveSummary | None, facts: JobFacts) -> Usage | None:
    """Run duration x the GPUs the target used; waste is the time no kernel ran (NVML utilization)."""
    if run.meta.duration_ns is not None:
        duration_s = run.meta.duration_ns / NS_PER_S
    else:
        duration_s = live.duration_s if live is not None else 0.0
    gpu_count = len(run.meta.gpus) or (len(live.gpus) if live is not None else 0)
    if duration_s <= 0 or gpu_count == 0:
        return None
    return Usage(gpu_hours=duration_s / 3600 * gpu_count, gpu_count=gpu_count,
                 peak_memory_bytes=_job_peak(facts), busy=facts.gpu_busy)


def with_saving(rec: Recommendation, base_usd: float | None) -> Recommendation:
    """The recommendation with est_saving_usd = its share of step time saved x the (projected) cost."""
    if base_usd is None or rec.est_step_saving is None:
        return replace(rec, est_saving_usd=None)
    return replace(rec, est_saving_usd=rec.est_step_saving * base_usd)


def right_size(usage: Usage, swap: gpu_swap.Swap | None, diagnosis: Diagnosis,
               projected_hours: float | None) -> Recommendation | None:
    """The cheaper GPU ``advice.gpu_swap`` found, priced over the run (or the projected job). Not offered for
    communication-bound runs: cheaper GPUs rarely have the interconnect."""
    if swap is None or diagnosis.verdict.primary == "communication":
        return None
    pick, current = swap.offer, swap.usd_per_gpu_hour
    hours = projected_hours if projected_hours is not None else usage.gpu_hours
    saving = (current - pick.usd_per_gpu_hour) * hours
    return Recommendation(
        code=codes.RIGHT_SIZE, title=f"Try a cheaper GPU: {pick.model} at ${pick.usd_per_gpu_hour:.2f}/GPU-h",
        detail=_right_size_detail(usage, swap, stalled=any(
            r.est_step_saving and r.stage in STALLS for r in diagnosis.recommendations)),
        est_step_saving=None, est_saving_usd=saving,
        reasoning=(f"({current:.4g} - {pick.usd_per_gpu_hour:.4g}) USD/GPU-h x {gpu_time(hours)} "
                   f"({'projected job' if projected_hours is not None else 'this run'}), assuming the same run "
                   f"time on the cheaper GPU. Price: {pick.source}."),
    )


def _right_size_detail(usage: Usage, swap: gpu_swap.Swap, *, stalled: bool) -> str:
    pick = swap.offer
    peak_gib = (usage.peak_memory_bytes or 0) / 2**30
    return (f"Peak memory {peak_gib:.1f} GiB fits the {pick.model}'s {pick.memory_bytes / 1e9:.0f} GB with "
            f"{RIGHT_SIZE_HEADROOM - 1:.0%} headroom, {swap.checked}, and the GPUs were busy only "
            f"{usage.busy or 0.0:.0%} of the time. It costs ${pick.usd_per_gpu_hour:.2f} instead of "
            f"${swap.usd_per_gpu_hour:.2f} per GPU-hour. Assumption: throughput differs between GPU models, and the "
            f"saving holds only if the run takes about as long on the {pick.model}; "
            + ("fix the stalls above first (they make the GPU look idle), then " if stalled else "")
            + "time a few steps on it before switching.")
