"""The `/runs/<id>` page: verdict, recommendations, cost, findings, and the charts that prove them."""

from __future__ import annotations

from dash import dcc, html
from dash.development.base_component import Component

from gpuscope import figures
from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.dashboards import ops_page
from gpuscope.dashboards.components import (
    CPU_JOB_COST,
    NA,
    card,
    chart,
    duration_s,
    duration_text,
    gpus_phrase,
    kv_table,
    status_badge,
    utc,
)
from gpuscope.dashboards.data import RunData
from gpuscope.dashboards.serving_view import run_serving
from gpuscope.figures import Absent, ChartResult, CostCard, EfficiencyCard
from gpuscope.format import (
    command_line,
    container_line,
    evidence_item,
    evidence_label,
    evidence_value,
    outlier_line,
    pct,
    printable_all,
    recurring_line,
    saving_text,
    step_line,
    windows_line,
    workload_line,
)
from gpuscope.model.diagnosis import resource_word
from gpuscope.model.report import Report

_NO_TRACE = Absent("no profiler trace in this run")
LIVE_MS = 2000
"""A recording run's page re-reads the store this often (the collector flushes at least once a second)."""


def layout(data: RunData) -> html.Div:
    """The page shell: what the report says at once; the sample charts follow in their own callback,
    so a day-long run's first read from the store never holds up the verdict."""
    live = data.meta.status == "running"
    return html.Div([
        dcc.Interval(id="run-tick", interval=LIVE_MS, disabled=not live),
        html.Div(body(data), id="run-body"),
        dcc.Loading(html.Div(html.P("Loading the timelines…", className="absent"), id="run-samples"),
                    delay_show=600, type="dot"),
    ], className="page")


def body(data: RunData) -> list[Component]:
    """The page's text and report charts; every string of the run goes in ``printable``."""
    meta, report = printable_all(data.meta), printable_all(data.report)
    head = [html.H1(meta.name or meta.id, id="run-name"),
            *([ops_page.tabs(meta.id, current="report")] if _has_trace(data) else []),
            html.P([status_badge(meta.status), f"  {meta.kind} run {meta.id} · host {meta.host or NA} · "
                    f"started {utc(meta.started_ns)} · duration {duration_text(duration_s(meta))} · "
                    f"{gpus_phrase(meta)}"], className="meta")]
    where = container_line(meta.tags)
    if where:
        head.append(html.P(where, className="meta", id="run-container"))
    if meta.command:
        command = command_line(meta.command)  # a URL's user and password are never shown
        head.append(html.P(html.Code(command if len(command) <= 300 else command[:299] + "…"), className="meta"))
    if meta.status == "running":
        head.append(html.P("Recording: this page refreshes itself every few seconds.", className="live",
                           id="live-note"))
    if data.problem:
        head.append(html.P(f"warning: {data.problem}", className="warning", id="report-problem"))
    if _has_trace(data):
        head.append(ops_page.timeline_links(meta.id))
    top = html.Div([_verdict(report), _cost(report)], className="row")
    parts: list[Component] = [*head, top]
    if report is not None and report.efficiency is not None:
        parts.append(_useful_work(report))
    if report is not None:
        parts += _steps(report) + _recommendations(report) + _findings(report) + _warnings(report)
    if report is not None and report.serving is not None:
        parts += run_serving(report.serving, revision=meta.id)
    parts.append(drawn(report_charts(report), revision=meta.id))
    return parts


def _has_trace(data: RunData) -> bool:
    return data.meta.kind == "trace" or (data.report is not None and bool(data.report.ranks))


def report_charts(report: Report | None) -> list[tuple[str, ChartResult]]:
    """The charts drawn from the report: step breakdown, ranks, kernels (the trace), the waste (the cost), the
    roofline (the traces' useful work), and the ranks' arrival at their collectives where they were matched."""
    ranks = report.ranks if report is not None else ()
    # Runs with traces' work (every trace run analysed since efficiency existed) get the roofline; it is not listed as
    # missing for the others, which never had one.
    roofline = [("roofline", figures.roofline(report.efficiency))] if report is not None and report.efficiency else []
    return [
        ("steps", figures.step_breakdown(ranks[0], figures.outlier_names(report))
         if ranks and report is not None else _NO_TRACE),
        ("ranks", figures.rank_comparison(ranks) if ranks else _NO_TRACE),
        ("kernels", figures.top_kernels(ranks) if ranks else _NO_TRACE),
        ("waste", figures.waste_breakdown(report.cost if report is not None else None)),
        *roofline,
        *([("arrivals", figures.arrival_chart(report))] if report is not None and report.arrivals is not None
          else []),
    ]


def sample_charts(data: RunData) -> Component:
    """The charts drawn from live samples (GPU and host timelines, stack samples), then one card naming
    every chart of the page the run has no data for, each with its reason."""
    results = [("gpu", figures.gpu_timelines(data.samples)), ("host", figures.host_timelines(data.samples)),
               ("stacks", figures.stack_icicle(data.stacks))]
    missing = [chart(key, result, revision="") for key, result in report_charts(data.report) + results
               if isinstance(result, Absent)]
    parts: list[Component] = [drawn(results, revision=data.meta.id)]
    if data.samples_problem:
        parts.insert(0, html.P(f"warning: {data.samples_problem}", className="warning", id="samples-problem"))
    if missing:
        parts.append(html.Div([html.H3("Not shown"), *missing], className="card absent-list", id="absent-charts"))
    return html.Div(parts)


def _verdict(report: Report | None) -> html.Section:
    if report is None:
        return card("Verdict", html.P("Not analysed yet: no report saved for this run.", className="absent"),
                    class_name="verdict")
    v = report.verdict
    workload = workload_line(report.ranks)
    kind = [html.P(f"workload: {workload}", className="dim", id="workload")] if workload else []
    if v.primary is None:
        return card("Verdict", html.P(v.summary or "No verdict: not enough evidence in this run.", className="absent"),
                    *kind, class_name="verdict")
    lines: list[Component] = [
        html.P([html.Strong(v.primary.replace("_", " "), id="verdict-primary"),
                f" · resource: {resource_word(v)} · confidence {pct(v.confidence, 0)}"], className="headline"),
        *kind,
    ]
    if v.summary:
        lines.append(html.P(v.summary))
    if v.secondary:
        lines.append(html.P("also: " + ", ".join(s.replace("_", " ") for s in v.secondary), className="dim"))
    if v.evidence:
        lines.append(kv_table([(evidence_label(k), evidence_value(k, val)) for k, val in v.evidence.items()]))
    return card("Verdict", *lines, class_name="verdict")


def _cost(report: Report | None) -> html.Section:
    if report is not None and report.cpu_job:
        return card("Cost", html.P(CPU_JOB_COST, className="absent"), class_name="cost")
    result = figures.cost_card(report.cost if report is not None else None,
                               report.live.shares if report is not None and report.live is not None else ())
    if isinstance(result, Absent):
        return card("Cost", html.P(result.reason, className="absent"), class_name="cost")
    assert isinstance(result, CostCard)
    parts: list[Component] = [kv_table(list(result.rows), table_id="cost-card")]
    if result.note:
        parts.append(html.P(result.note, className="dim"))
    return card("Cost", *parts, class_name="cost")


def _useful_work(report: Report) -> html.Section:
    """MFU with the peak it is measured against and the peak's source, or "n/a" with the reason."""
    result = figures.efficiency_card(report.efficiency)
    if isinstance(result, Absent):
        return card("Useful work", html.P(result.reason, className="absent"), class_name="efficiency")
    assert isinstance(result, EfficiencyCard)
    parts: list[Component] = [kv_table(list(result.rows), table_id="mfu-card")]
    if result.note:
        parts.append(html.P(result.note, className="dim", id="mfu-note"))
    return card("Useful work", *parts, class_name="efficiency")


def _steps(report: Report) -> list[Component]:
    """The job's step time with its spread, and each outlier step, marked, with what took its extra time."""
    line = step_line(facts_of(report))
    if line is None:
        return []
    facts = facts_of(report)
    parts: list[Component] = [html.P(f"step time {line}", id="step-spread")]
    if facts.recurring is not None:
        parts.append(html.P([html.Strong("recurring "), recurring_line(facts.recurring)], id="recurring-steps"))
    if report.outlier_steps:
        parts.append(html.Ul([html.Li([html.Strong("outlier "), outlier_line(o, ranks=len(report.ranks))])
                              for o in report.outlier_steps], id="outlier-steps"))
    windows = windows_line(facts, report.ranks, report.outlier_steps)
    if windows is not None:
        parts.append(html.P(f"windows: {windows}", className="dim", id="step-windows"))
    return [card("Steps", *parts)]


def _recommendations(report: Report) -> list[Component]:
    if not report.recommendations:
        return []
    items = []
    for rec in report.recommendations:
        items.append(html.Li([html.Strong(rec.title), html.Span(" · " + saving_text(rec, report.cost),
                                                                className="saving"),
                              html.P(rec.detail), html.P(rec.reasoning, className="dim") if rec.reasoning else None]))
    return [card("What to change", html.Ol(items, id="recommendations"))]


def _findings(report: Report) -> list[Component]:
    if not report.findings:
        return []
    rows = [html.Tr([html.Td(f.severity, className=f"sev-{f.severity}"), html.Td(f.title),
                     html.Td(pct(f.time_share)),
                     html.Td(", ".join(evidence_item(k, v) for k, v in list(f.evidence.items())[:4]),
                             className="dim")]) for f in report.findings]
    head = html.Thead(html.Tr([html.Th(h) for h in ("severity", "finding", "share", "evidence")]))
    return [card("Findings", html.Table([head, html.Tbody(rows)], className="grid"))]


def _warnings(report: Report) -> list[Component]:
    return [html.P(f"warning: {w}", className="warning") for w in report.warnings]


def drawn(results: list[tuple[str, ChartResult]], *, revision: str) -> html.Div:
    """The figures among ``results``; the absent ones are listed by ``sample_charts``."""
    return html.Div([chart(key, result, revision=revision) for key, result in results
                     if not isinstance(result, Absent)], className="charts")
