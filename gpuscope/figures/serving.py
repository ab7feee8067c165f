"""Serving figures: each phase's share of a server's step time beside its GPU busy share, and what a million
output tokens cost on each serving pod of a fleet."""

from __future__ import annotations

import plotly.graph_objects as go

from gpuscope.figures.base import Absent, ChartResult, safe_text, styled
from gpuscope.model.serving import ServingPod, ServingReport

MAX_PODS = 15
_PHASE_COLORS = {"prefill": "#1f77b4", "decode": "#ff7f0e", "mixed": "#9467bd"}


def phase_shares(serving: ServingReport | None) -> ChartResult:
    """Per phase: its share of the classified step time, and how busy the GPU was in it (both 0..1)."""
    if serving is None or not serving.phases:
        return Absent("no prefill or decode steps in this run's traces (no serving engine's step ranges, "
                      "no KV-cache attention kernels)")
    names = list(serving.phases)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=names, y=[serving.phases[n].share for n in names], name="share of step time",
                         marker_color=[_PHASE_COLORS.get(n, "#7f7f7f") for n in names],
                         hovertemplate="%{x}<br>%{y:.1%} of step time<extra></extra>"))
    fig.add_trace(go.Scatter(x=names, y=[serving.phases[n].gpu_busy for n in names], name="GPU busy",
                             mode="markers", marker={"size": 14, "color": "#2ca02c", "symbol": "diamond"},
                             hovertemplate="%{x}<br>GPU busy %{y:.1%}<extra></extra>"))
    fig.update_yaxes(tickformat=".0%", range=[0, 1.05])
    return styled(fig, title="Prefill and decode: share of the step time, and GPU busy in each", height=300)


def pod_token_costs(pods: tuple[ServingPod, ...], *, top: int = MAX_PODS) -> ChartResult:
    """Dollars per million output tokens on each serving pod (most output tokens first)."""
    priced = [p for p in pods if p.metrics.usd_per_million_output_tokens is not None][:top]
    if not priced:
        return Absent("no serving pod with both tokens and a GPU price: set one with --usd-per-gpu-hour")
    names = [safe_text(p.name, 40) for p in priced][::-1]
    fig = go.Figure(go.Bar(
        y=names, x=[p.metrics.usd_per_million_output_tokens for p in priced][::-1], orientation="h",
        marker_color="#1f77b4", name="$ per million output tokens",
        customdata=[[p.metrics.output_tokens_per_s or 0.0] for p in priced][::-1],
        hovertemplate="%{y}<br>$%{x:.3f} per million output tokens<br>%{customdata[0]:,.0f} tokens/s"
                      "<extra></extra>"))
    fig.update_xaxes(title="USD per million output tokens", tickprefix="$")
    return styled(fig, title="What a million output tokens cost, by pod (its GPUs' cost over its tokens)",
                  height=max(240, 60 + 28 * len(priced)))
