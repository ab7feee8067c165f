"""Step-time figures: the breakdown per step, per rank, and two runs against each other.

Categories and their order are the PyTorch profiler TensorBoard plugin's (see the README), so
the stacked parts add up to the step time and read the same as in that plugin.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gpuscope.figures.base import (
    BREAKDOWN_COLORS,
    BREAKDOWN_LABELS,
    BREAKDOWN_ORDER,
    Absent,
    ChartResult,
    percent,
    safe_text,
    styled,
)
from gpuscope.format import ms
from gpuscope.model.rank import RankReport, StepBreakdown
from gpuscope.model.report import Report


def step_breakdown(rank: RankReport, outliers: Collection[str] = ()) -> ChartResult:
    """Stacked bars, one per profiler step, of where the step's time went (ms), with the rank's median and p90 step
    as lines and each of ``outliers`` (the job's outlier steps, by number) marked above its bar."""
    if rank.per_step:
        labels = [safe_text(f"step {s.name}" if s.name.isdigit() else s.name, 24) for s in rank.per_step]
        parts = [s.breakdown_us for s in rank.per_step]
        busy: list[float | None] = [s.gpu_busy for s in rank.per_step]
    elif rank.step_breakdown_us.total > 0:
        labels, parts, busy = ["whole window"], [rank.step_breakdown_us], [rank.gpu_busy]
    else:
        return Absent("no step times in this run (no profiler trace)")
    fig = go.Figure()
    _stack(fig, labels, parts)
    fig.update_layout(barmode="stack", yaxis_title="ms", xaxis={"type": "category"}, bargap=_gap(len(labels)))
    custom = [[percent(b)] for b in busy]
    for trace in fig.data:
        trace.customdata = custom
        trace.hovertemplate = "%{x}: " + trace.name + " %{y:.3~f} ms (GPU busy %{customdata[0]})<extra></extra>"
    _spread(fig, rank)
    _mark(fig, rank, labels, outliers)
    return styled(fig, title=f"Step time breakdown, rank {rank.rank}", height=380)


def _spread(fig: go.Figure, rank: RankReport) -> None:
    """The rank's median and p90 step as dashed lines across the bars."""
    for name, value, dash in (("median", rank.step_time_median_us, "dash"), ("p90", rank.step_time_p90_us, "dot")):
        if value is not None and len(rank.per_step) > 1:
            fig.add_hline(y=value / 1000, line={"color": "black", "dash": dash, "width": 1},
                          annotation_text=f"{name} {ms(value)}", annotation_position="top left")


def _mark(fig: go.Figure, rank: RankReport, labels: Sequence[str], outliers: Collection[str]) -> None:
    """A marker over each outlier step's bar: left out of the step time, priced on its own."""
    hits = [(label, s.duration_us / 1000) for label, s in zip(labels, rank.per_step) if s.name in outliers]
    if not hits:
        return
    fig.add_trace(go.Scatter(x=[x for x, _ in hits], y=[y for _, y in hits], mode="markers+text", name="outlier",
                             text=["outlier"] * len(hits), textposition="top center",
                             marker={"symbol": "triangle-down", "color": "#e377c2", "size": 11},
                             hovertemplate="%{x}: outlier step, %{y:.3~f} ms (left out of the step time)"
                                           "<extra></extra>"))


def outlier_names(report: Report) -> frozenset[str]:
    """The job's outlier steps by number (``Report.outlier_steps``), as ``step_breakdown`` marks them."""
    return frozenset(str(o.step) for o in report.outlier_steps)


def rank_comparison(ranks: Sequence[RankReport]) -> ChartResult:
    """Mean step breakdown of every rank side by side, with each rank's GPU busy share: stragglers stand out."""
    if len(ranks) < 2:
        return Absent("one rank only: nothing to compare across ranks")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    labels = [f"rank {r.rank}" for r in ranks]
    _stack(fig, labels, [r.step_breakdown_us for r in ranks])
    medians = [r.step_time_median_us / 1000 if r.step_time_median_us is not None else None for r in ranks]
    if any(m is not None for m in medians):
        fig.add_trace(go.Scatter(x=labels, y=medians, mode="markers", name="median step",
                                 marker={"symbol": "line-ew-open", "color": "black", "size": 18},
                                 hovertemplate="%{x}: median step %{y:.3~f} ms<extra></extra>"), secondary_y=False)
    busy = [r.gpu_busy for r in ranks]
    if any(b is not None for b in busy):
        fig.add_trace(go.Scatter(x=labels, y=busy, mode="markers+lines", name="GPU busy",
                                 marker={"color": "black", "size": 8}, line={"color": "black", "dash": "dot"},
                                 hovertemplate="%{x}: GPU busy %{y:.1%}<extra></extra>"), secondary_y=True)
    fig.update_layout(barmode="stack", xaxis={"type": "category"})
    fig.update_yaxes(title_text="mean step (ms)", secondary_y=False)
    fig.update_yaxes(title_text="GPU busy", tickformat=".0%", range=[0, 1.05], secondary_y=True, showgrid=False)
    return styled(fig, title="Ranks compared: mean step time breakdown", height=400)


def compare_breakdown(a: Report, b: Report) -> ChartResult:
    """Two runs' mean step breakdowns (averaged over ranks) as two stacked bars."""
    means = [mean_breakdown(r) for r in (a, b)]
    if any(x is None for x in means):
        missing = " and ".join(label for label, x in zip("AB", means, strict=True) if x is None)
        return Absent(f"run {missing} has no step times (no profiler trace)")
    labels = [safe_text(f"A: {a.run.name or a.run.id}", 40), safe_text(f"B: {b.run.name or b.run.id}", 40)]
    fig = go.Figure()
    _stack(fig, labels, [x for x in means if x is not None])
    fig.update_layout(barmode="stack", yaxis_title="mean step (ms)", xaxis={"type": "category"}, bargap=_gap(2))
    return styled(fig, title="Step time breakdown, A vs B", height=400)


def mean_breakdown(report: Report) -> StepBreakdown | None:
    """The step breakdown averaged over a report's ranks; None without ranks."""
    if not report.ranks:
        return None
    n = len(report.ranks)
    return StepBreakdown(**{key: sum(getattr(r.step_breakdown_us, key) for r in report.ranks) / n
                            for key in BREAKDOWN_ORDER})


def _gap(bars: int) -> float:
    """Few bars stay bar-shaped instead of filling the whole width."""
    return 0.7 if bars <= 2 else 0.5 if bars <= 5 else 0.2


def _stack(fig: go.Figure, labels: Sequence[str], parts: Sequence[StepBreakdown]) -> None:
    """One bar trace per category (in the plugin's order), values in ms; categories all zero are left out."""
    for key in BREAKDOWN_ORDER:
        values_ms = [getattr(p, key) / 1000 for p in parts]
        if not any(values_ms):
            continue
        fig.add_trace(go.Bar(x=list(labels), y=values_ms, name=BREAKDOWN_LABELS[key],
                             marker_color=BREAKDOWN_COLORS[key],
                             hovertemplate="%{x}: " + BREAKDOWN_LABELS[key] + " %{y:.3~f} ms<extra></extra>"))
