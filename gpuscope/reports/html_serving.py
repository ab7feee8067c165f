"""The HTML report's serving section (``Report.serving``): the server's tokens, load, cost per token and latency,
the prefill and decode phases of its traces and its graph replays, with the lines and rows the terminal shows
(``serving_view``)."""

from __future__ import annotations

from markupsafe import Markup

from gpuscope.model.report import Report
from gpuscope.reports.html_blocks import html, join, table
from gpuscope.reports.serving_view import (
    GRAPH_COLUMNS,
    GRAPHS_TITLE,
    PHASE_COLUMNS,
    graph_rows,
    metric_lines,
    phase_rows,
    phases_title,
)


def section(report: Report) -> Markup:
    """The section; empty for a run that is not a server's."""
    serving = report.serving
    if serving is None or (serving.metrics is None and not serving.phases and not serving.graphs):
        return Markup()
    out = [Markup('<h2 id="serving">Serving</h2>')]
    if serving.metrics is not None:
        head, *lines = metric_lines(serving.metrics, serving.source)
        out.append(html('<p id="serving-metrics"><strong>{}</strong><br>{}</p>', head, join(lines, Markup("<br>"))))
    if serving.phases:
        out += [html("<h3>{}</h3>", phases_title(serving)),
                table(PHASE_COLUMNS, phase_rows(serving), numeric={1, 2, 3, 4, 6}, table_id="serving-phases")]
    if serving.graphs:
        out += [html("<h3>{}</h3>", GRAPHS_TITLE),
                table(GRAPH_COLUMNS, graph_rows(serving), numeric={1, 2, 3}, table_id="serving-graphs")]
    return join(out)
