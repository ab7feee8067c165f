"""The candidate's numbers in github-action-benchmark's ``customSmallerIsBetter`` format, so existing
benchmark dashboards can chart them: a JSON list of ``{"name", "unit", "value", "extra"}``.

Every entry must be smaller-is-better, so GPU busy is given as the share of the step the GPU was not busy.
Metrics a run cannot tell are left out rather than written as 0. One entry, "not comparable", is always there:
the number of reasons the runs could not be compared (0 when they could), the reasons in its ``extra``; the
candidate's own numbers are left out when there is such a reason, since they are not a measure of this job.
"""

from __future__ import annotations

from typing import Any

from gpuscope.gate import text
from gpuscope.gate.result import GateResult, MetricResult


def to_benchmark(result: GateResult, *, prefix: str = "gpuscope") -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = [_comparable(result, prefix)]
    for m in result.metrics:
        if not isinstance(m.candidate, float | int):
            continue
        name, unit, value = _entry(m, float(m.candidate))
        entries.append({"name": f"{prefix} {name}".strip(), "unit": unit, "value": round(value, 6),
                        "extra": f"baseline {text.value(m, m.baseline)}, change {text.change(m)}, "
                                 f"p {text.p_value(m)}, {text.status(m)}; measured as {m.definition}"})
    return entries


def _comparable(result: GateResult, prefix: str) -> dict[str, Any]:
    lines = text.mismatch_lines(result)
    extra = "; ".join(lines) if lines else "the runs are runs of one job"
    return {"name": f"{prefix} not comparable".strip(), "unit": "reasons", "value": len(result.blocking),
            "extra": extra}


def _entry(m: MetricResult, value: float) -> tuple[str, str, float]:
    if m.key == "gpu_busy":
        return "GPU not busy", "%", (1.0 - value) * 100
    if m.unit == "us":
        return m.title.lower(), "ms", value / 1000
    if m.unit == "share":
        return f"{m.title.lower()} share", "%", value * 100
    if m.unit == "usd":
        return m.title.lower(), "USD", value
    return m.title.lower(), "GiB", value / 2**30
