"""The job-level facts: each number that more than one rule or view uses, computed once with one statistic.

A report that says "peak memory 93% of the device" in one place and "double the batch size" in another has
used two statistics for one fact (the worst rank, and the mean over ranks). Here each fact has exactly one
definition (``DEFINITIONS``, quoted by the gate's table and docs/diagnosis.md), and the rules, the cost model,
the gate and the views read the value from ``Report.facts``.

Step time is the mean of all the steady job steps (``analyzers.trace.step_stats.step_time_us``, the statistic
each rank's ``step_time_us`` is too): N steps cost N times it, the breakdown's parts add up to it, and a stall that
recurs, or a checkpoint save in the window, is in it as often as it happened: the job paid for it. Robust figures
(median, p90, spread) stand beside it and say which steps are slow; slow steps that recur are described
(``recurring``: "every 4th step +60 ms"), and a lone one is an outlier (``Report.outlier_steps``) whose step the
typical steps, and so the stage shares and the verdict, leave out (``typical_step_us``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

import numpy as np

from gpuscope.analyzers.diagnosis.job_steps import (
    duration_us,
    job_step_times_us,
    job_steps,
    outlier_job_steps,
    typical_job_step_times_us,
    typical_job_steps,
)
from gpuscope.analyzers.trace.step_stats import SlowSteps, slow_steps, step_stats, step_time_us, threshold_us
from gpuscope.model.diagnosis import JobFacts, RecurringSteps, Stage
from gpuscope.model.live import GpuLive, LiveSummary
from gpuscope.model.rank import RankReport
from gpuscope.model.report import Report

DEFINITIONS: dict[str, str] = {
    "step_time_us": "mean of all the job's steady steps, slow ones included (warm-up steps left out); a job's step "
                    "ends when its slowest rank's step does",
    "typical_step_us": "mean of the job's typical steps: the steady steps less the lone outlier, if any (the step "
                       "the stage shares are shares of)",
    "step_time_median_us": "median of all the job's steady steps",
    "step_time_p90_us": "90th percentile of all the job's steady steps (linear interpolation between closest ranks)",
    "step_time_spread_us": "1.4826 x the median absolute deviation of the job's steady steps from their median "
                           "(a robust standard deviation)",
    "outlier_steps": "the one steady job step longer than median + max(3.5 x spread, 25% of the median) of the "
                     "others, when only one is and it recurs at no period (Iglewicz and Hoaglin's modified z-score "
                     "over 3.5, and a quarter longer than the median at least); none with fewer than 3 steady steps",
    "recurring": "slow steps that recur: every p-th step slow against the others (3 times or more), or two or more "
                 "slow steps at no one period",
    "gpu_busy": "share of the job's GPU time with a kernel, copy or memset running, over the steady window: each "
                "rank's busy share weighted by its GPU time (traces), else the live busy share averaged over the "
                "run's GPUs: NVML utilization.gpu, the job's own SM share on a GPU it shared, GR engine active on "
                "a MIG slice",
    "peak_memory_share": "the worst rank's (or GPU's) peak allocated memory over its device memory (on a GPU the job "
                         "shared, its own processes' memory)",
    "data_wait_share": "the data_loading stage's share of the typical step: the DataLoader's time (the TensorBoard "
                       "plugin's category) over the step, ranks weighted by their windows",
    "exposed_comm_share": "the communication stage's share of the typical step: collective time no kernel, copy or "
                          "memset covers (the TensorBoard plugin's Communication) plus host time blocked in "
                          "collective waits, over the step, ranks weighted by their windows",
}
"""What each fact means, in one sentence: the one statistic every view states."""
__all__ = ["DEFINITIONS", "facts_of", "job_facts", "job_step_times_us", "job_steps", "outlier_job_steps",
           "typical_job_step_times_us", "typical_job_steps"]


def job_facts(ranks: Sequence[RankReport], live: LiveSummary | None,
              stage_shares: Mapping[Stage, float | None]) -> JobFacts:
    """The facts of a run from its per-rank analyses, its live summary and its stage shares."""
    step_us, steps = _step_time(ranks)
    busy, busy_source = _gpu_busy(ranks, live)
    return replace(
        _distribution(ranks, _peak_memory(ranks, live)),
        step_time_us=step_us,
        steady_steps=steps,
        ranks=len(ranks),
        gpu_busy=busy,
        gpu_busy_source=busy_source,
        data_wait_share=stage_shares.get("data_loading"),
        exposed_comm_share=stage_shares.get("communication"),
    )


def _distribution(ranks: Sequence[RankReport], facts: JobFacts) -> JobFacts:
    """``facts`` with the figures of the steady job steps' spread: median, p90, spread, the typical step, the
    slow-step threshold, the lone outlier's time over the typical step, and the slow steps that recur. Without
    per-step records, the typical step is the step time."""
    rows = job_steps(ranks)
    times = np.array([duration_us(records) for records in rows], dtype=np.float64)
    stats = step_stats(times)
    if stats is None:
        fallback, steps = _step_time(ranks)
        return replace(facts, typical_step_us=fallback, typical_steps=steps)
    slow = slow_steps(times)
    typical = np.delete(times, [slow.lone]) if slow.lone is not None else times
    typical_us = float(typical.mean()) if typical.size else None
    rest = np.delete(times, list(slow.periodic))
    extra = float(times[slow.lone]) - (typical_us or 0.0) if slow.lone is not None else 0.0
    return replace(facts, step_time_median_us=stats.median_us, step_time_p90_us=stats.p90_us,
                   step_time_spread_us=stats.spread_us, typical_step_us=typical_us, typical_steps=int(typical.size),
                   outlier_threshold_us=threshold_us(rest), outlier_step_count=int(slow.lone is not None),
                   outlier_extra_us=extra, recurring=recurring(slow, times, [records[0].name for records in rows]))


def recurring(slow: SlowSteps, times: Sequence[float] | np.ndarray, names: Sequence[str]) -> RecurringSteps | None:
    """The slow steps of ``times`` that recur, described (``names``: the steps' own numbers); None when none do."""
    repeated = slow.repeated
    if not repeated or slow.reference_us is None:
        return None
    t = np.asarray(times, dtype=np.float64)
    extra = t[list(repeated)] - slow.reference_us
    # Slow steps at a period and others beside them are told as slow steps at no one period.
    period = slow.period if slow.periodic and not slow.recurring else None
    per_period = len({i % period for i in slow.periodic}) if period else 0
    return RecurringSteps(steps=tuple(_number(names[i]) for i in repeated), period=period, per_period=per_period,
                          extra_us=float(extra.mean()), per_step_us=float(extra.sum() / t.size),
                          reference_us=slow.reference_us, steady_steps=int(t.size))


def _number(name: str) -> int | str:
    return int(name) if name.isdigit() else name


def _step_time(ranks: Sequence[RankReport]) -> tuple[float | None, int]:
    """(the job's step time, the steady steps behind it): the mean of every steady job step, from the ranks'
    per-step records; for ranks without them (a report built without per-step detail), the slowest rank's step
    time."""
    times = job_step_times_us(ranks)
    if times:
        return step_time_us(times), len(times)
    means = [r.step_time_us for r in ranks if r.steps > 0 and r.step_time_us]
    if means and len(means) == len(ranks):
        return max(means), min(r.steps for r in ranks)
    return None, 0


def facts_of(report: Report) -> JobFacts:
    """The report's facts; recomputed from its parts for a report saved before facts existed."""
    if report.facts is not None:
        return report.facts
    return job_facts(report.ranks, report.live, report.stage_shares)


def _gpu_busy(ranks: Sequence[RankReport], live: LiveSummary | None
              ) -> tuple[float | None, Literal["trace", "nvml", "dcgm"] | None]:
    """Trace busy weighted by GPU time when every rank with GPU work knows it, else the live busy share
    (``GpuLive.busy_mean``: NVML utilization, the job's own SM share on a shared GPU, DCGM's GR engine on MIG)."""
    gpu_ranks = [r for r in ranks if r.gpu_busy is not None]
    weight = sum(_gpu_time_us(r) for r in gpu_ranks)
    if gpu_ranks and weight > 0:
        return sum((r.gpu_busy or 0.0) * _gpu_time_us(r) for r in gpu_ranks) / weight, "trace"
    if gpu_ranks:
        return statistics.fmean(r.gpu_busy or 0.0 for r in gpu_ranks), "trace"
    known = [g for g in live.gpus if g.busy_mean is not None] if live is not None else []
    if known:
        dcgm = all(g.busy_source == "gr_engine_active" for g in known)
        return statistics.fmean(g.busy_mean or 0.0 for g in known), "dcgm" if dcgm else "nvml"
    return None, None


def _gpu_time_us(r: RankReport) -> float:
    window = r.steady_window_us if r.steady_window_us is not None else r.window_us
    return window * r.gpu_count


def _share(r: RankReport) -> float | None:
    m = r.memory
    if m.peak_share is not None:
        return m.peak_share
    return m.peak_allocated_bytes / m.device_bytes if m.peak_allocated_bytes is not None and m.device_bytes else None


def _peak_memory(ranks: Sequence[RankReport], live: LiveSummary | None) -> JobFacts:
    """The worst peak, from traces when any rank knows it, else from live NVML samples. Worst by share of its
    device where devices are known, else by bytes."""
    known = [r for r in ranks if r.memory.peak_allocated_bytes is not None]
    if known:
        by_share = [r for r in known if _share(r) is not None]
        top = (max(by_share, key=lambda r: _share(r) or 0.0) if by_share
               else max(known, key=lambda r: r.memory.peak_allocated_bytes or 0))
        return JobFacts(peak_memory_share=_share(top), peak_memory_bytes=top.memory.peak_allocated_bytes,
                        device_memory_bytes=top.memory.device_bytes, peak_memory_rank=top.rank,
                        peak_memory_lower_bound=top.memory.lower_bound,
                        peak_memory_all_known=len(known) == len(ranks) and not any(r.memory.lower_bound
                                                                                  for r in ranks))
    if live is None:
        return JobFacts()
    # On a GPU the job shared with other processes its own processes' memory is its peak, not the device's use.
    own = {s.gpu: s.own_memory_peak_bytes for s in live.shares if s.shared}
    gpus = [replace(g, memory_used_peak_bytes=own[g.gpu]) if g.gpu in own else g for g in live.gpus]
    gpus = [g for g in gpus if g.memory_used_peak_bytes is not None]
    if not gpus:
        return JobFacts()

    shared = [g for g in gpus if _gpu_share(g) is not None]
    peak = max(shared, key=lambda g: _gpu_share(g) or 0.0) if shared else max(
        gpus, key=lambda g: g.memory_used_peak_bytes or 0)
    return JobFacts(peak_memory_share=_gpu_share(peak), peak_memory_bytes=peak.memory_used_peak_bytes,
                    device_memory_bytes=peak.memory_total_bytes, peak_memory_rank=peak.gpu,
                    peak_memory_all_known=not ranks and len(gpus) == len(live.gpus))


def _gpu_share(g: GpuLive) -> float | None:
    return (g.memory_used_peak_bytes or 0) / g.memory_total_bytes if g.memory_total_bytes else None
