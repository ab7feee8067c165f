"""The cost card (what the job cost, what of it was wasted) and the waste chart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import plotly.graph_objects as go

from gpuscope.figures.base import Absent, ChartResult, percent, styled
from gpuscope.format import (
    JOB_LENGTH_HINT,
    gpu_time,
    hourly_usd,
    money_frame,
    price_line,
    shared_cost_line,
    shared_gpu_line,
    usd,
)
from gpuscope.model.cost import CostReport
from gpuscope.model.live import GpuShare

_WASTE_LABELS = {"idle": "idle", "data_loading": "input-starved", "host_overhead": "host overhead",
                 "communication": "waiting on communication", "memory": "memory-bound",
                 "unattributed": "not busy, cause not measured", "outlier_steps": "outlier steps"}
_WASTE_COLORS = {"idle": "#7f7f7f", "data_loading": "#ff7f0e", "host_overhead": "#d62728",
                 "communication": "#9467bd", "memory": "#17becf", "unattributed": "#bcbd22",
                 "outlier_steps": "#e377c2"}


@dataclass(frozen=True)
class CostCard:
    """The cost as a card: label -> printed value ("n/a" where unknown), in reading order."""

    rows: tuple[tuple[str, str], ...]
    note: str | None = None


def _number(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:,.4g} {unit}"


def cost_card(cost: CostReport | None, shares: Sequence[GpuShare] = ()) -> CostCard | Absent:
    """The figures a cost card shows; Absent when the report has no cost at all. ``shares``: the live summary's
    per-GPU parts, shown for a GPU the run shared with other processes."""
    if cost is None:
        return Absent("no cost for this run (no GPU-hours or price known)")
    wasted_share = (cost.wasted_usd / cost.total_usd
                    if cost.wasted_usd is not None and cost.total_usd else None)
    price = price_line(cost.usd_per_gpu_hour, cost.price_source, share_basis=cost.gpu_share_basis,
                       whole_usd_per_gpu_hour=cost.whole_usd_per_gpu_hour).removeprefix("at ")
    shared = tuple(("Shared GPU", shared_gpu_line(s)) for s in shares if s.shared)
    if cost.held_usd is not None:
        shared += (("Shared GPU cost", shared_cost_line(cost.own_usd, cost.held_usd, cost.own_basis,
                                                         cost.neighbours_usd)),)
    hourly = hourly_usd(cost)
    job = usd(cost.projected_usd) if cost.projected_usd is not None else JOB_LENGTH_HINT
    rows = (
        ("Whole job", job),
        ("Per hour", usd(hourly) + (f", of which wasted {usd(hourly * wasted_share)}"
                                    if hourly is not None and wasted_share is not None else "")),
        ("Per 1,000 steps", usd(cost.per_1k_steps_usd)),
        ("Per 1,000 samples", usd(cost.per_1k_samples_usd)),
        ("Wasted", percent(wasted_share, 0) + " of the cost" if wasted_share is not None else "n/a"),
        *shared,
        ("This run", f"{usd(cost.total_usd)} ({gpu_time(cost.gpu_hours)})"),
        ("Price", price),
        ("Energy", _number(cost.energy_kwh, "kWh")),
        ("CO2", _number(cost.co2_kg, "kg")),
    )
    return CostCard(rows=rows, note=cost.note)


def waste_breakdown(cost: CostReport | None) -> ChartResult:
    """One horizontal bar of the total: the useful part and each cause of waste, in dollars."""
    if cost is None or cost.total_usd is None:
        return Absent("no cost for this run, so no waste to split")
    split = {f.name: getattr(cost.waste_by_cause_usd, f.name) for f in fields(cost.waste_by_cause_usd)}
    known = {k: v for k, v in split.items() if v is not None and v > 0}
    if not known:
        return Absent("the waste was not split by cause for this run")
    useful = cost.total_usd - (cost.wasted_usd if cost.wasted_usd is not None else sum(known.values()))
    # In the dollars the views frame the cost in (the job, an hour, the run): a few seconds of trace cost
    # fractions of a cent, which an axis would print in micro-dollars.
    frame = money_frame(cost)
    fig = go.Figure()
    parts = [("useful", max(useful, 0.0), "#2ca02c")] + [(_WASTE_LABELS[k], v, _WASTE_COLORS[k])
                                                          for k, v in known.items()]
    for label, value, color in parts:
        fig.add_trace(go.Bar(y=["cost"], x=[value * frame.factor], name=label, orientation="h", marker_color=color,
                             hovertemplate=f"{label}: {usd(value * frame.factor)}<extra></extra>"))
    fig.update_layout(barmode="stack", yaxis={"visible": False},
                      xaxis={"title": f"USD {frame.label}", "tickprefix": "$", "tickformat": ",.2f"})
    return styled(fig, title=f"Where the {usd(cost.total_usd * frame.factor)} {frame.label} went", height=200)
