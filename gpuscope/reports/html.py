"""The report as one self-contained HTML file: page one for whoever pays, then the details that prove it.

Everything in it comes from a saved Report (and the run's samples and stacks for the live charts),
so it agrees to the digit with ``gpuscope show``, ``--json`` and the dashboard.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd
from markupsafe import Markup

from gpuscope import figures
from gpuscope.format import container_line, gpus_line
from gpuscope.model.diff import Diff
from gpuscope.model.memory import MemoryReport
from gpuscope.model.report import Report
from gpuscope.model.run import StackSamples
from gpuscope.reports import html_details as details
from gpuscope.reports.html_blocks import CSP, CSS, Charts, html, join
from gpuscope.reports.html_diff import section as diff_section
from gpuscope.reports.html_efficiency import efficiency as efficiency_section
from gpuscope.reports.html_memory import section as memory_section
from gpuscope.reports.html_serving import section as serving_section
from gpuscope.reports.html_stragglers import section as stragglers_section
from gpuscope.reports.html_summary import summary
from gpuscope.reports.html_timeline import timeline_section
from gpuscope.reports.timeline import StepFile


@dataclass(frozen=True)
class ReportDocument:
    """What a report is made of."""

    report: Report
    samples: pd.DataFrame | None = None
    """The run's live samples (long format) for the timelines; None for a trace run."""
    stacks: StackSamples | None = None
    before: Report | None = None
    """With ``--compare``: the run this one is compared against (before -> this run, after)."""
    diff: Diff | None = None
    """With ``--compare``: the change from ``before`` to this run, explained (``gpuscope.changes.explain``)."""
    generated_ns: int | None = None
    step_files: tuple[StepFile, ...] = ()
    """The slowest and the median profiler step as Perfetto traces (``reports.timeline.report_step_files``)."""
    memory: MemoryReport | None = None
    """What filled the GPUs' memory at the peak, where the traces recorded memory events (``gpuscope memory``)."""


def title(doc: ReportDocument) -> str:
    run = doc.report.run
    return f"gpuscope report: {run.name or run.id}"


def render_html(doc: ReportDocument) -> str:
    """The whole document as a string. Every string from the run is text in it (see ``html_blocks``)."""
    report = doc.report
    charts = Charts()
    page_one = summary(report, charts, before=doc.before)
    rest = [details.steps(report, charts),
            timeline_section(doc.step_files, report.run.id, has_trace=bool(report.ranks)),
            details.kernels(report, charts), efficiency_section(report, charts), details.communication(report),
            stragglers_section(report, charts), serving_section(report),
            details.memory(report), memory_section(doc.memory, charts) if doc.memory else Markup(),
            details.live(report.live, doc.samples, doc.stacks, charts)]
    if doc.diff is not None:
        rest.append(diff_section(doc.diff, charts))
    if doc.before is not None:
        rest.append(Markup("<h2>Before and after: step time</h2>")
                    + charts.block("compare", figures.compare_breakdown(doc.before, report)))
    rest += [details.findings(report), details.recommendations(report), details.cost(report.cost),
             details.warnings(report, charts), details.methods()]
    body = html('{}{}<section class="details page-break" id="details">{}</section>', _header(doc), page_one,
                join(rest))
    return str(html('<!doctype html>\n<html lang="en" data-charts="loading"><head><meta charset="utf-8">'
                    '<meta http-equiv="Content-Security-Policy" content="{}">'
                    '<meta name="viewport" content="width=device-width, initial-scale=1">'
                    "<title>{}</title><style>{}</style></head><body>{}{}</body></html>\n",
                    Markup(CSP), title(doc), Markup(CSS), body, charts.scripts()))


def _header(doc: ReportDocument) -> Markup:
    run = doc.report.run
    gpus = gpus_line([(g.model, g.mig_profile) for g in run.gpus], cpu_job=doc.report.cpu_job)
    where = container_line(run.tags)
    when = datetime.fromtimestamp((doc.generated_ns or time.time_ns()) / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    started = "" if run.started_ns is None else " · started " + datetime.fromtimestamp(
        run.started_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    return html('<header><h1 id="run-name">{}</h1><p class="meta">gpuscope report · {} run {} · {}{} · written {}</p>'
                "{}</header>", run.name or run.id, run.kind, run.id, gpus, started, when,
                html('<p class="meta" id="run-container">{}</p>', where) if where else "")
