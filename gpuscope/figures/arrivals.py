"""The ranks' arrival at their collectives: one bar per rank, how long after the first rank it arrives on average,
the stragglers in red (``Report.arrivals``, ``Report.stragglers``)."""

from __future__ import annotations

import plotly.graph_objects as go

from gpuscope.figures.base import Absent, ChartResult, percent, styled
from gpuscope.format import ms
from gpuscope.model.report import Report

STRAGGLER = "#d62728"
OTHER = "#1f77b4"


def arrival_chart(report: Report | None) -> ChartResult:
    """Mean arrival after the first rank per rank (ms), with the share of collectives each reached last and the
    wait it caused the others."""
    arrivals = report.arrivals if report is not None else None
    if report is None or arrivals is None or not arrivals.ranks:
        return Absent("no collectives matched across ranks (one rank, or none they share)")
    caused = {s.rank: s for s in report.stragglers}
    ranks = sorted(arrivals.ranks, key=lambda r: r.rank)
    hover = []
    for r in ranks:
        s = caused.get(r.rank)
        extra = (f"<br>straggler: the others wait {ms(s.wait_caused_us)} per step for it, in {s.consistent_in} of "
                 f"{s.consistency_units} {s.consistency_unit}s" if s is not None else "")
        hover.append(f"rank {r.rank}: {ms(r.late_mean_us)} after the first, last at {percent(r.last_share, 0)} of "
                     f"the collectives, its own wait {ms(r.wait_us)} per step{extra}")
    fig = go.Figure(go.Bar(
        x=[str(r.rank) for r in ranks], y=[r.late_mean_us / 1000 for r in ranks],
        marker_color=[STRAGGLER if r.rank in caused else OTHER for r in ranks],
        hovertext=hover, hoverinfo="text", name="arrival"))
    fig.update_layout(xaxis={"type": "category", "title": "rank"}, yaxis_title="ms after the first rank",
                      showlegend=False)
    return styled(fig, title=f"Arrival at the collectives ({arrivals.matched} matched)", height=340)
