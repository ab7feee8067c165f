"""How the gate's numbers read in the table, the Markdown summary and JUnit messages."""

from __future__ import annotations

from gpuscope.gate.result import MetricResult
from gpuscope.reports.format import gib, ms, usd

STATUS_WORDS = {"pass": "pass", "regression": "FAIL", "improvement": "improved", "weak": "weak", "unknown": "n/a"}


def value(m: MetricResult, which: float | str | None) -> str:
    if which is None:
        return "n/a"
    if isinstance(which, str):
        return which
    if m.unit == "us":
        return ms(which)
    if m.unit == "share":
        return f"{which * 100:.1f}%"
    if m.unit == "usd":
        return usd(which)
    if m.unit == "bytes":
        return gib(which)
    return f"{which:.3g}"


def change(m: MetricResult) -> str:
    if m.change is None:
        return "n/a"
    shown = round(m.change * 100, 1) + 0.0  # no "-0.0" for a change that rounds to nothing
    return f"{shown:+.1f} pts" if m.change_kind == "points" else f"{shown:+.1f}%"


def threshold(m: MetricResult) -> str:
    sign = "-" if m.higher_is_better else "+"
    if m.change_kind == "points":
        return f"{sign}{m.threshold * 100:.1f} pts"
    return f"{sign}{m.threshold * 100:.0f}%"


def p_value(m: MetricResult) -> str:
    if m.p_value is None:
        return "n/a"
    return "<0.001" if m.p_value < 0.001 else f"{m.p_value:.3f}"


def status(m: MetricResult) -> str:
    return STATUS_WORDS[m.status]
