"""Fleet figures over a FleetReport: the fleet's busy share over time, and where each group's dollars went."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from gpuscope.figures.base import Absent, ChartResult, percent, safe_text, styled
from gpuscope.model.fleet import FleetReport

MAX_GROUPS = 15
_PARTS = (("idle", "Idle", "#d62728"), ("underused", "Under-used", "#ff7f0e"), ("busy", "Busy", "#2ca02c"))


def fleet_busy_timeline(report: FleetReport) -> ChartResult:
    """Mean busy share of the GPUs that reported, per step; a step no GPU reported in is a gap in the line."""
    if not report.timeline_ns or all(v is None for v in report.timeline_busy):
        return Absent("no GPU reported a utilisation in the window")
    times = np.array(report.timeline_ns, dtype="datetime64[ns]")
    busy = np.array([np.nan if v is None else v for v in report.timeline_busy])
    fig = go.Figure(go.Scatter(x=times, y=busy, mode="lines", name="busy", line={"color": "#1f77b4"},
                               connectgaps=False, hovertemplate="%{x}<br>busy %{y:.1%}<extra></extra>"))
    fig.update_yaxes(title="busy share", tickformat=".0%", range=[0, 1])
    return styled(fig, title=f"Fleet busy share over time (mean over GPUs, step {report.step_s:g} s)", height=300)


def group_costs(report: FleetReport, *, top: int = MAX_GROUPS) -> ChartResult:
    """Per group (most waste first), its cost split into idle, under-used and busy dollars."""
    groups = [g for g in report.groups if g.cost_usd is not None][:top]
    if not groups:
        return Absent("no group has a known price: set one with --usd-per-gpu-hour (see `gpuscope prices`)")
    names = [safe_text(g.name, 40) for g in groups][::-1]
    parts = {
        "idle": [g.idle_usd or 0.0 for g in groups][::-1],
        "underused": [g.underused_usd or 0.0 for g in groups][::-1],
        "busy": [(g.cost_usd or 0.0) - (g.wasted_usd or 0.0) for g in groups][::-1],
    }
    fig = go.Figure()
    for key, label, color in _PARTS:
        fig.add_trace(go.Bar(y=names, x=parts[key], name=label, orientation="h", marker_color=color,
                             hovertemplate=f"%{{y}}<br>{label} $%{{x:,.2f}}<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="USD over the window", tickprefix="$")
    shown = f"top {len(groups)} of {len(report.groups)}" if len(report.groups) > len(groups) else "all groups"
    return styled(fig, title=f"Cost by {safe_text(report.group_by)}, {shown}, most waste first "
                             f"(busy {percent(report.busy)})", height=max(260, 60 + 26 * len(groups)))
