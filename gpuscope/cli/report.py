"""`gpuscope report RUN_OR_TRACE`: a report to forward, as one offline HTML file or a PDF."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer

from gpuscope.analyzers import consistency
from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.api.analysis import analyze_path
from gpuscope.api.memory import MemoryInputs, memory_of_run
from gpuscope.changes import DiffOptions, explain
from gpuscope.cli.common import (
    StepRangeOption,
    TargetMfuOption,
    TimeoutOption,
    check_target_mfu,
    fail,
    open_store,
    stderr,
    warn,
    warn_loaded,
)
from gpuscope.cli.prices import analysis_options
from gpuscope.format import printable
from gpuscope.model.redact import bare_url
from gpuscope.model.run import RunMeta
from gpuscope.net.deadline import Timeouts
from gpuscope.reports.browser import Browser, BrowserError, find_browser
from gpuscope.reports.timeline import report_step_files
from gpuscope.store import Store, StoreError
from gpuscope.traces import is_url

if TYPE_CHECKING:
    from gpuscope.reports.html import ReportDocument

Format = Literal["html", "pdf"]


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    target: str = typer.Argument(..., metavar="RUN_OR_TRACE",
                                 help="A saved run id (or unique prefix), a trace file or a directory of ranks, or "
                                      "an fsspec URL of either."),
    fmt: str | None = typer.Option(None, "--format", "-f", help="html or pdf (default: from -o's suffix, else html)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Where to write (default: gpuscope-<run>.<fmt>)."),
    compare: str | None = typer.Option(None, "--compare", metavar="OTHER",
                                       help="A run (or trace) to compare against: OTHER before, this run after."),
    paper: str = typer.Option("a4", "--paper", help="PDF paper size: a4 or letter."),
    browser: str | None = typer.Option(None, "--browser", help="Chromium to print the PDF with (default: found "
                                                               "on PATH or $GPUSCOPE_BROWSER)."),
    usd_per_gpu_hour: float | None = typer.Option(None, "--usd-per-gpu-hour", min=0.0,
                                                  help="Price per GPU-hour, over the catalog's."),
    job_hours: float | None = typer.Option(None, "--job-hours", min=0.0,
                                           help="Length of the whole job, to project its cost."),
    job_steps: int | None = typer.Option(None, "--job-steps", min=0, help="Steps in the whole job."),
    target_mfu: TargetMfuOption = None,
    timeout_s: float | None = TimeoutOption,
    step_range: StepRangeOption = None,
) -> None:
    """Write a report to forward: what the job cost, what of it bought nothing, why, and what to change."""
    check_target_mfu(target_mfu)
    kind = _format(fmt, output)
    if paper not in ("a4", "letter"):
        fail(f"--paper {paper}: use a4 or letter")
    binary = _browser(browser) if kind == "pdf" else None
    try:  # plotly draws the charts: an extra, so the core install stays lean
        from gpuscope.reports.html import render_html, title
        from gpuscope.reports.pdf import Paper, render_pdf
    except ImportError as exc:
        fail(f"the report needs plotly ({exc.name} is missing): pip install 'gpuscope[report]'")
    pricing = Pricing(usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps,
                      target_mfu=target_mfu, timeout_s=timeout_s, timeouts=Timeouts.within(timeout_s),
                      step_range=step_range)
    with open_store() as store:
        if _memory_run(store, target) is not None:  # a snapshot's run: its memory is all it has
            _write_memory_report(store, target, kind, output, paper, binary)
            return
        doc = document(store, target, pricing)
        if compare is not None:
            before = document(store, compare, pricing).report
            doc = replace(doc, before=before, diff=explain(before, doc.report,
                                                           DiffOptions(usd_per_gpu_hour=usd_per_gpu_hour,
                                                                       job_steps=job_steps, job_hours=job_hours)))
    out = output or Path(f"gpuscope-{doc.report.run.id}.{kind}")
    html_text = render_html(doc)
    try:
        if kind == "html":
            out.write_text(html_text, encoding="utf-8")
        else:
            assert binary is not None
            size: Paper = "letter" if paper == "letter" else "a4"
            with Browser(binary) as chromium:
                data = render_pdf(html_text, browser=chromium, paper=size, footer=title(doc))
            out.write_bytes(data)
    except BrowserError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    stderr.print(f"wrote {out} ({kind}, run {doc.report.run.id})", style="dim")


def _memory_run(store: Store, target: str) -> str | None:
    """The id of the memory run ``target`` names (a snapshot kept by `gpuscope memory`); None for anything else."""
    if is_url(target) or Path(target).exists():
        return None
    try:
        run_id = store.resolve(target)
    except StoreError:
        return None
    return run_id if store.get_meta(run_id).kind == "memory" else None


def _write_memory_report(store: Store, target: str, kind: Format, output: Path | None, paper: str,
                         binary: str | None) -> None:
    from gpuscope.api.memory import memory
    from gpuscope.reports.html_memory import render_memory_html
    from gpuscope.reports.memory import shown_source
    from gpuscope.reports.pdf import render_pdf

    report = memory(target, store=store)
    out = output or Path(f"gpuscope-{report.run_id}.{kind}")
    text = render_memory_html(report)
    try:
        if kind == "html":
            out.write_text(text, encoding="utf-8")
        else:
            assert binary is not None
            with Browser(binary) as chromium:
                out.write_bytes(render_pdf(text, browser=chromium, paper="letter" if paper == "letter" else "a4",
                                           footer=f"gpuscope memory: {shown_source(report)}"))
    except BrowserError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    stderr.print(f"wrote {out} ({kind}, memory run {report.run_id})", style="dim")


def _format(fmt: str | None, output: Path | None) -> Format:
    if fmt is None:
        return "pdf" if output is not None and output.suffix.lower() == ".pdf" else "html"
    if fmt not in ("html", "pdf"):
        fail(f"--format {fmt}: use html or pdf")
    return "pdf" if fmt == "pdf" else "html"


def _browser(explicit: str | None) -> str:
    try:
        return find_browser(explicit)
    except BrowserError as exc:
        fail(str(exc))


@dataclass(frozen=True)
class Pricing:
    """The price and projection options, as `gpuscope analyze` takes them; any of them re-analyses a saved run."""

    usd_per_gpu_hour: float | None = None
    job_hours: float | None = None
    job_steps: int | None = None
    target_mfu: float | None = None
    timeout_s: float | None = None
    """``--timeout``: a deadline for reading traces (``gpuscope.api.analysis.remote_timeouts``)."""
    timeouts: Timeouts | None = None
    """The one deadline of the command, shared by the report's run and the one it is compared with."""
    step_range: str | None = None
    """``--step-range``: the range that marks a step in a trace analysed first."""

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.usd_per_gpu_hour, self.job_hours, self.job_steps, self.target_mfu))

    def options(self, meta: RunMeta) -> AnalysisOptions:
        return analysis_options(meta, usd_per_gpu_hour=self.usd_per_gpu_hour, job_hours=self.job_hours,
                                job_steps=self.job_steps, target_mfu=self.target_mfu)


def document(store: Store, target: str, pricing: Pricing) -> ReportDocument:
    """The report of a saved run, or of a trace analysed (and saved) first, with the run's samples and stacks."""
    from gpuscope.figures import GPU_TIMELINE_METRICS, HOST_TIMELINE_METRICS
    from gpuscope.reports.html import ReportDocument

    path: Path | str = target if is_url(target) else Path(target)
    run_id = _analyse_path(store, path, pricing) if is_url(target) or Path(path).exists() else _saved(store, target)
    meta = store.get_meta(run_id)
    if meta.kind == "fleet":
        fail(f"run {run_id} is a fleet run: `gpuscope show {run_id}` shows it; a report covers one job")
    saved = None if pricing.given else store.load_report(run_id)
    if saved is None:
        run = store.load_run(run_id)
        if not run.traces and run.samples is None and run.stacks is None:
            fail(f"run {run_id} has no recorded data to analyse")
        saved = build_report(run, pricing.options(run.meta))
        store.save_report(run_id, saved)
    samples = store.samples(run_id, metrics=tuple(dict.fromkeys(GPU_TIMELINE_METRICS + HOST_TIMELINE_METRICS)))
    return ReportDocument(report=consistency.enforce(saved), samples=samples if len(samples) else None,
                          stacks=store.stacks(run_id),
                          step_files=report_step_files(store.load_traces(run_id), run_id),
                          memory=memory_of_run(store, run_id, MemoryInputs(usd_per_gpu_hour=pricing.usd_per_gpu_hour,
                                                                           job_hours=pricing.job_hours)))


def _saved(store: Store, target: str) -> str:
    try:
        return store.resolve(target)
    except StoreError as exc:
        fail(f"{target}: no such trace file or folder, and {exc}")


def _analyse_path(store: Store, path: Path | str, pricing: Pricing) -> str:
    """Read, analyse and save a trace (as `gpuscope analyze` does); the new run's id."""

    _, meta = analyze_path(path, usd_per_gpu_hour=pricing.usd_per_gpu_hour, job_hours=pricing.job_hours,
                           job_steps=pricing.job_steps, save=True, store=store, on_loaded=warn_loaded, on_note=warn,
                           target_mfu=pricing.target_mfu, timeout_s=pricing.timeout_s, timeouts=pricing.timeouts,
                           step_range=pricing.step_range)
    print(f"gpuscope: analysed {printable(bare_url(path) if isinstance(path, str) else path)} as run {meta.id}",
          file=sys.stderr)
    return meta.id
