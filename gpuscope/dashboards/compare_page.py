"""The `/compare?a=<id>&b=<id>` page: two runs side by side, with the change from A to B."""

from __future__ import annotations

from urllib.parse import parse_qs

from dash import dcc, html
from dash.development.base_component import Component

from gpuscope import figures
from gpuscope.changes import explain
from gpuscope.dashboards.components import NA, chart, duration_s, duration_text, gpus_phrase, status_badge
from gpuscope.dashboards.data import RunReader, UnknownRun
from gpuscope.figures.summary import verdict_text
from gpuscope.format import printable_all
from gpuscope.model.diagnosis import Verdict
from gpuscope.model.report import Report, RunSummary
from gpuscope.model.run import RunMeta
from gpuscope.reports.diff import caveat_lines, headline


def query_ids(search: str | None) -> tuple[str | None, str | None]:
    """``a`` and ``b`` from ``?a=..&b=..`` (first value each)."""
    params = parse_qs((search or "").lstrip("?"))
    a, b = params.get("a"), params.get("b")
    return (a[0] if a else None), (b[0] if b else None)


def _stub(meta: RunMeta) -> Report:
    """A run without a saved report compares as one whose every figure is unknown."""
    return Report(run=RunSummary(id=meta.id, kind=meta.kind, name=meta.name), ranks=(),
                  verdict=Verdict(primary=None, resource="unknown"))


def layout(reader: RunReader, search: str | None) -> html.Div:
    a_id, b_id = query_ids(search)
    if a_id is None and b_id is None:
        return html.Div([html.H1("Compare runs"), html.P("Pick two runs on the ", className="absent",
                                                         id="compare-pick"),
                         dcc.Link("runs list", href="/")], className="page")
    try:
        metas = [reader.meta(a_id), reader.meta(b_id)]
    except UnknownRun as exc:
        return html.Div([html.H1("Compare runs"), html.P(f"Cannot compare: {exc}. Pick two runs on the ",
                                                         className="absent", id="compare-error"),
                         dcc.Link("runs list", href="/")], className="page")
    reports = [reader.report(m.id) or _stub(m) for m in metas]
    deltas = figures.compare(reports[0], reports[1])
    change = explain(reports[0], reports[1])
    revision = f"{metas[0].id}/{metas[1].id}"
    head = html.Thead(html.Tr([html.Th(""), html.Th("A"), html.Th("B"), html.Th("change B - A")]))
    body = [html.Tr([html.Th(d.label), html.Td(d.a), html.Td(d.b),
                     html.Td(d.change, className={True: "better", False: "worse", None: ""}[d.better])])
            for d in deltas]
    return html.Div([
        html.H1("Compare runs"),
        html.Div([_side("A", metas[0], reports[0]), _side("B", metas[1], reports[1])], className="row"),
        html.Section([html.H3("Deltas"), html.Table([head, html.Tbody(body)], className="grid", id="deltas")],
                     className="card"),
        html.Section([html.H3("What changed from A to B"),
                      *(html.P(line, className="warning") for line in caveat_lines(printable_all(change))),
                      html.P(headline(change), id="diff-headline"),
                      chart("waterfall", figures.waterfall(change), revision=revision)], className="card"),
        chart("compare", figures.compare_breakdown(reports[0], reports[1]), revision=revision),
    ], className="page")


def _side(label: str, meta: RunMeta, report: Report) -> html.Section:
    meta, report = printable_all(meta), printable_all(report)
    lines: list[Component] = [
        html.H3([f"{label}: ", dcc.Link(meta.name or meta.id, href=f"/runs/{meta.id}")]),
        html.P([status_badge(meta.status), f"  {meta.kind} · {meta.id}"], className="meta"),
        html.P(f"duration {duration_text(duration_s(meta))} · {gpus_phrase(meta)}", className="meta"),
        html.P(f"verdict: {verdict_text(report)}"),
    ]
    if report.verdict.summary:
        lines.append(html.P(report.verdict.summary, className="dim"))
    if not report.ranks and report.live is None:
        lines.append(html.P(f"no analysis figures ({NA})", className="dim"))
    return html.Section(lines, className="card")
