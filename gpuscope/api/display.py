"""How a report shows itself in Jupyter: the HTML report's page one, restyled to sit inside a notebook.

Page one (verdict, GPU busy, cost and waste, the top changes) comes from ``gpuscope.reports.html_summary``.
The one chart is a stacked bar drawn in HTML and CSS from the figures' own numbers and colours, so a
display costs a few kilobytes, needs no plotly.js in the page and no network, and reads the same in
JupyterLab, the classic notebook, VS Code and a notebook exported to HTML.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from markupsafe import Markup

from gpuscope.figures import ChartResult, waste_breakdown
from gpuscope.figures.base import BREAKDOWN_COLORS, BREAKDOWN_LABELS, BREAKDOWN_ORDER
from gpuscope.figures.steps import mean_breakdown
from gpuscope.format import ms, pct, usd
from gpuscope.model.report import Report
from gpuscope.reports.html_blocks import Charts, html, join
from gpuscope.reports.html_summary import summary

ROOT_CLASS = "gpuscope-report"
# Page one points to a section of the full HTML report; in a notebook the rest is on the object.
MORE_IN_REPORT = 'under "Every recommendation"'
MORE_IN_NOTEBOOK = "in <code>report.recommendations</code>"
# Every rule is under the root class: a notebook's own styles stay as they are.
CSS = f"""
.{ROOT_CLASS} {{ font-size: 13px; line-height: 1.45; max-width: 960px; }}
.{ROOT_CLASS} h2 {{ font-size: 16px; margin: 10px 0 4px; }} .{ROOT_CLASS} h3 {{ font-size: 14px; margin: 10px 0 4px; }}
.{ROOT_CLASS} .dim, .{ROOT_CLASS} .meta {{ opacity: 0.75; }}
.{ROOT_CLASS} .verdict {{ font-size: 14px; font-weight: 500; }}
.{ROOT_CLASS} .kpis {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); gap: 8px;
  margin: 8px 0; }}
.{ROOT_CLASS} .kpi {{ border: 1px solid rgba(127,127,127,0.35); border-radius: 6px; padding: 6px 8px; }}
.{ROOT_CLASS} .kpi .label, .{ROOT_CLASS} .kpi .sub {{ font-size: 11px; opacity: 0.75; }}
.{ROOT_CLASS} .kpi .value {{ font-size: 18px; font-weight: 600; }}
.{ROOT_CLASS} table.grid {{ border-collapse: collapse; margin: 4px 0 8px; font-size: 13px; }}
.{ROOT_CLASS} table.grid td, .{ROOT_CLASS} table.grid th {{ padding: 2px 8px; text-align: left; }}
.{ROOT_CLASS} table.grid .num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.{ROOT_CLASS} .saving {{ color: #1e7d32; font-weight: 600; }} .{ROOT_CLASS} .warning {{ color: #9a6700; }}
.{ROOT_CLASS} .bar {{ display: flex; height: 22px; border-radius: 4px; overflow: hidden; margin: 4px 0; }}
.{ROOT_CLASS} .bar span {{ display: block; height: 100%; }}
.{ROOT_CLASS} .legend span {{ margin-right: 12px; white-space: nowrap; font-size: 12px; }}
.{ROOT_CLASS} .legend i {{ display: inline-block; width: 10px; height: 10px; margin-right: 4px; border-radius: 2px; }}
"""


@dataclass(frozen=True)
class BarPart:
    """One segment of the bar: its label, value and colour, and the value as printed."""

    label: str
    value: float
    color: str
    text: str


class NoCharts(Charts):
    """Page one's chart slots left empty: the notebook view draws its one chart itself."""

    def block(self, label: str, result: ChartResult, caption: str = "") -> Markup:
        return Markup()


def report_html(report: Report) -> str:
    """The report's notebook view: a header line, page one and one bar chart. Every string from the run is
    text in it (see ``reports.html_blocks``)."""
    run = report.run
    head = html('<p class="meta">gpuscope · {} run <code>{}</code>{}</p>', run.kind, run.id,
                " · " + run.name if run.name else "")
    # Page one's own words, matched in its HTML: the same words in a run's text are escaped (&#34;), so they stay.
    page_one = Markup(str(summary(report, NoCharts())).replace(MORE_IN_REPORT, MORE_IN_NOTEBOOK))
    return str(html('<div class="{}"><style>{}</style>{}{}{}</div>', ROOT_CLASS, Markup(CSS), head, page_one,
                    chart_html(report)))


def chart_html(report: Report) -> Markup:
    """The mean steady step's breakdown when a trace gave steps; else where the cost went; else nothing."""
    steps = mean_breakdown(report)
    if steps is not None and steps.total > 0:
        parts = [BarPart(BREAKDOWN_LABELS[k], getattr(steps, k), BREAKDOWN_COLORS[k], ms(getattr(steps, k)))
                 for k in BREAKDOWN_ORDER]
        return bar_html(f"Where the {ms(steps.total)} step went (mean over ranks)", parts)
    figure = waste_breakdown(report.cost)
    if isinstance(figure, go.Figure) and report.cost is not None:
        return bar_html(str(figure.layout.title.text), _figure_parts(figure))  # framed as the report frames it
    return Markup()


def _figure_parts(figure: go.Figure) -> list[BarPart]:
    """A one-bar stacked horizontal figure's segments, as the figure builder named and coloured them."""
    return [BarPart(str(t.name), float(t.x[0]), str(t.marker.color), usd(float(t.x[0]))) for t in figure.data]


def bar_html(title: str, parts: Sequence[BarPart]) -> Markup:
    """One stacked horizontal bar with a legend; parts of zero are left out, widths are shares of the total."""
    shown = [p for p in parts if p.value > 0]
    total = sum(p.value for p in shown)
    if not shown or total <= 0:
        return Markup()
    segments = join(html('<span style="width:{}%;background:{}" title="{}: {}"></span>',
                         f"{p.value / total * 100:.3f}", p.color, p.label, p.text) for p in shown)
    legend = join(html('<span><i style="background:{}"></i>{} {} ({})</span>', p.color, p.label, p.text,
                       pct(p.value / total, 0)) for p in shown)
    return html('<h3>{}</h3><div class="bar" role="img" aria-label="{}">{}</div><div class="legend">{}</div>',
                title, title, segments, legend)
