"""The report as one self-contained HTML file: page one for whoever pays, then the details that prove it.

Everything in it comes from a saved Report (and the run's samples and stacks for the live charts),
so it agrees to the digit with ``gpuscope show``, ``--json`` and the dashboard.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd

from gpuscope import figures
from gpuscope.format import container_line, gpus_line
from gpuscope.model.report import Report
from gpuscope.model.run import StackSamples
from gpuscope.reports import html_details as details
from gpuscope.reports.html_assets import CSP, CSS, Charts, esc
from gpuscope.reports.html_summary import summary


@dataclass(frozen=True)
class ReportDocument:
    """What a report is made of."""

    report: Report
    samples: pd.DataFrame | None = None
    """The run's live samples (long format) for the timelines; None for a trace run."""
    stacks: StackSamples | None = None
    before: Report | None = None
    """With ``--compare``: the run this one is compared against (before -> this run, after)."""
    generated_ns: int | None = None


def title(doc: ReportDocument) -> str:
    run = doc.report.run
    return f"gpuscope report: {run.name or run.id}"


def render_html(doc: ReportDocument) -> str:
    """The whole document as a string."""
    report = doc.report
    charts = Charts()
    page_one = summary(report, charts, before=doc.before)
    rest = [details.steps(report, charts), details.kernels(report, charts), details.communication(report),
            details.memory(report), details.live(report.live, doc.samples, doc.stacks, charts)]
    if doc.before is not None:
        rest.append("<h2>Before and after: step time</h2>"
                    + charts.block("compare", figures.compare_breakdown(doc.before, report)))
    rest += [details.findings(report), details.recommendations(report), details.cost(report.cost),
             details.warnings(report, charts), details.methods()]
    body = (_header(doc) + page_one + '<section class="details page-break" id="details">'
            + "".join(rest) + "</section>")
    return ("<!doctype html>\n"
            f'<html lang="en" data-charts="loading"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title(doc))}</title><style>{CSS}</style></head>"
            f"<body>{body}{charts.scripts()}</body></html>\n")


def _header(doc: ReportDocument) -> str:
    run = doc.report.run
    gpus = gpus_line([(g.model, g.mig_profile) for g in run.gpus])
    where = container_line(run.tags)
    when = datetime.fromtimestamp((doc.generated_ns or time.time_ns()) / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    started = "" if run.started_ns is None else " · started " + datetime.fromtimestamp(
        run.started_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f'<header><h1 id="run-name">{esc(run.name or run.id)}</h1>'
            f'<p class="meta">gpuscope report · {esc(run.kind)} run {esc(run.id)} · {esc(gpus)}{started}'
            f" · written {when}</p>" + (f'<p class="meta" id="run-container">{esc(where)}</p>' if where else "")
            + "</header>")
