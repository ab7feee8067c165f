"""Run-level numbers a view puts side by side: one run's headline figures and two runs' deltas."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import fmean

from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.figures.base import percent
from gpuscope.format import usd
from gpuscope.model.diagnosis import resource_word
from gpuscope.model.report import Report


@dataclass(frozen=True)
class Delta:
    """One compared figure: A, B, and the change from A to B, all as printed text."""

    label: str
    a: str
    b: str
    change: str
    better: bool | None
    """True when B improved on A, False when it got worse, None when unknown or not ranked."""


def step_time_us(report: Report) -> float | None:
    """The job's step time (``JobFacts.step_time_us``); None without profiler steps."""
    return facts_of(report).step_time_us


def gpu_busy(report: Report) -> float | None:
    """The trace's GPU busy share (``JobFacts.gpu_busy`` when it comes from a trace); None without one."""
    facts = facts_of(report)
    return facts.gpu_busy if facts.gpu_busy_source == "trace" else None


def gpu_util(report: Report) -> float | None:
    """Mean NVML utilization over the GPUs live sampling saw; None without samples."""
    if report.live is None:
        return None
    known = [g.util_mean for g in report.live.gpus if g.util_mean is not None]
    return fmean(known) if known else None


def verdict_text(report: Report) -> str:
    v = report.verdict
    if v.primary is None:
        return "n/a"
    return f"{v.primary.replace('_', ' ')} ({resource_word(v)})"


def _ms(us: float | None) -> str:
    if us is None:
        return "n/a"
    return f"{us / 1e6:.3g} s" if us >= 1e6 else f"{us / 1000:.3g} ms"


def _numeric(label: str, a: float | None, b: float | None, text: Callable[[float | None], str], *,
             lower_is_better: bool, share: bool = False) -> Delta:
    if a is None or b is None:
        return Delta(label, text(a), text(b), "n/a", None)
    diff = b - a
    if share:
        change = f"{diff * 100:+.1f} pts"
    else:
        sign = "+" if diff >= 0 else "-"
        change = sign + text(abs(diff)) + (f" ({diff / a:+.0%})" if a else "")
    better = None if diff == 0 else (diff < 0) == lower_is_better
    return Delta(label, text(a), text(b), change, better)


def compare(a: Report, b: Report) -> tuple[Delta, ...]:
    """Step time, GPU busy, verdict and costs of run B against run A."""
    def cost(report: Report, field: str) -> float | None:
        value = getattr(report.cost, field) if report.cost is not None else None
        return float(value) if value is not None else None

    va, vb = verdict_text(a), verdict_text(b)
    return (
        _numeric("Step time (mean)", step_time_us(a), step_time_us(b), _ms, lower_is_better=True),
        _numeric("GPU busy (trace)", gpu_busy(a), gpu_busy(b), percent, lower_is_better=False, share=True),
        _numeric("GPU util (sampled)", gpu_util(a), gpu_util(b), percent, lower_is_better=False, share=True),
        Delta("Verdict", va, vb, "same" if va == vb else "changed", None),
        _numeric("Cost per step", cost(a, "per_step_usd"), cost(b, "per_step_usd"), usd, lower_is_better=True),
        _numeric("Total cost", cost(a, "total_usd"), cost(b, "total_usd"), usd, lower_is_better=True),
        _numeric("Wasted", cost(a, "wasted_usd"), cost(b, "wasted_usd"), usd, lower_is_better=True),
    )
