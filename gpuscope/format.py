"""How numbers read in every human-facing view (terminal, figures, dashboard, reports): one module, so they agree
to the digit. Unknown is "n/a", never 0; shares are fractions in data and percent only here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuscope.model.report import CostReport, RankReport, Recommendation

_UNIT_SUFFIXES = ("_bytes_per_s", "_us", "_bytes", "_usd")
"""Evidence keys whose unit the printed value carries: the key is shown without it."""


def pct(share: float | None, digits: int = 1) -> str:
    return "n/a" if share is None else f"{share * 100:.{digits}f}%"


def ms(us: float | None) -> str:
    if us is None:
        return "n/a"
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def usd(value: float | None) -> str:
    """Dollars: whole above $100, cents above a cent, four decimals for the fractions of a cent a profiler sample
    costs; an exact zero is $0.00."""
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"${value:,.0f}"
    return f"${value:,.2f}" if abs(value) >= 0.01 or value == 0 else f"${value:.4f}"


def saving_text(rec: Recommendation, cost: CostReport | None) -> str:
    """What a recommendation saves, as every view prints it: the share of step time, then dollars."""
    parts = [f"saves ~{pct(rec.est_step_saving, 0)} of step time"] if rec.est_step_saving is not None else []
    money = saving_usd_text(rec, cost)
    if money:
        parts.append(money)
    return ", ".join(parts) or "saving n/a"


def saving_usd_text(rec: Recommendation, cost: CostReport | None) -> str | None:
    """A recommendation's dollars: for the job (projected) or this run when a cent or more; a saving too small to
    show that way (a few seconds of trace) per 1,000 steps, else per hour of the job's GPUs, never as $0.00."""
    saved = rec.est_saving_usd
    if saved is None:
        return None
    if abs(saved) >= 0.01 or cost is None:
        return f"~{usd(saved)}" + ("" if cost is None else " over the job" if cost.projected_usd is not None
                                   else " on this run")
    if rec.est_step_saving is not None and cost.per_1k_steps_usd is not None \
            and rec.est_step_saving * cost.per_1k_steps_usd >= 0.01:
        return f"~{usd(rec.est_step_saving * cost.per_1k_steps_usd)} per 1,000 steps"
    base = cost.projected_usd if cost.projected_usd is not None else cost.total_usd
    if base and cost.usd_per_gpu_hour:
        per_hour = saved / (base / cost.usd_per_gpu_hour) * (cost.gpu_count or 1)
        if abs(per_hour) >= 0.01:
            return f"~{usd(per_hour)} per hour"
    return f"~{usd(saved)} on this run"


def gib(nbytes: int | float | None) -> str:
    return "n/a" if nbytes is None else f"{nbytes / 2**30:.1f} GiB"


def rate(bytes_per_s: float | None) -> str:
    if bytes_per_s is None:
        return "n/a"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(bytes_per_s) >= size:
            return f"{bytes_per_s / size:.1f} {unit}"
    return f"{bytes_per_s:.0f} B/s"


def num(value: float | int | None, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value:,.{digits}f}{unit}"


def evidence_value(key: str, value: float | int | str | None) -> str:
    """Render an evidence entry by the unit its name carries."""
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if key.endswith(("_share", "_fraction", "_util", "_ratio", "busy", "overlap", "confidence")):
        return pct(float(value))
    if key.endswith("_bytes_per_s"):
        return rate(float(value))
    if key.endswith("_us"):
        return ms(float(value))
    if key.endswith("_bytes"):
        return gib(value)
    if key.endswith("_usd"):
        return usd(float(value))
    return num(value, digits=2)


def workload_line(ranks: Sequence[RankReport]) -> str | None:
    """"training" / "inference" per the ranks' traces (with what decided it), or None when no rank can tell."""
    kinds = sorted({r.workload for r in ranks if r.workload is not None})
    if not kinds:
        return None
    why = next((r.workload_evidence for r in ranks if r.workload_evidence), "")
    return " and ".join(kinds) + (f" ({why})" if why and len(kinds) == 1 else "")


def evidence_item(key: str, value: float | int | str | None) -> str:
    """``name=value`` with the unit in the value, not twice (``step_time=177.6 ms``, not ``step_time_us=177.6 ms``)."""
    label = next((key.removesuffix(s) for s in _UNIT_SUFFIXES if key.endswith(s) and value is not None
                  and not isinstance(value, str)), key)
    return f"{label}={evidence_value(key, value)}"
