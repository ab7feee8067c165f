"""The `/runs/<id>/memory` page: what filled each GPU's memory at the peak. The timeline with the peak marked,
what the memory held then, the largest allocations live then with their source lines, and the advice; from a
trace run's memory events, or a memory run's snapshot (whose own page it is).

Frame, file and op names come from the recording: they go in as text (table cells through ``grid.cells``, and
``Text`` nodes, escaped by React), never as Markdown or HTML.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dash import html
from dash.development.base_component import Component

from gpuscope.analyzers.memory import MemoryOptions, snapshot_memory, trace_memory
from gpuscope.dashboards import grid, ops_page
from gpuscope.dashboards.components import chart
from gpuscope.dashboards.data import RunReader, UnknownRun
from gpuscope.dashboards.grid import Column
from gpuscope.figures.memory import device_title, memory_makeup, memory_timeline
from gpuscope.format import gib, pct, printable_all
from gpuscope.model.memory import DeviceMemory, MemoryAdvice, MemoryReport
from gpuscope.model.run import RunMeta
from gpuscope.pricing import CatalogError, PriceError, first_gpu_model, resolve_price
from gpuscope.reports.html_memory import source
from gpuscope.reports.memory import peak_line, priced_text, shown_source
from gpuscope.store import Store
from gpuscope.store.memory_runs import load_memory_report, load_snapshot

GROUPS_SHOWN = 25


def is_memory_run(reader: RunReader, run_id: str) -> bool:
    try:
        return reader.meta(run_id).kind == "memory"
    except UnknownRun:  # the run page says so
        return False


def layout(reader: RunReader, run_id: str) -> html.Div:
    meta = reader.meta(run_id)
    head: list[Component] = [html.H1(printable_all(meta.name or meta.id), id="run-name")]
    if meta.kind != "memory":
        head.append(ops_page.tabs(meta.id, current="memory"))
    report = memory_report(reader.store, meta)
    if report is None or not report.devices:
        return html.Div([*head, html.P("No GPU memory in this run: record the trace with profile_memory=True, or "
                                       "give gpuscope memory a snapshot (torch.cuda.memory._dump_snapshot).",
                                       className="absent", id="no-memory")], className="page")
    report = printable_all(replace(report, source=shown_source(report)))
    head.append(html.P(f"{report.kind} {report.source}", className="meta"))
    body = [part for d in report.devices for part in _device(d, report)]
    warnings = [html.P(f"warning: {w}", className="warning") for w in report.warnings]
    return html.Div([*head, *body, *warnings], className="page", id="memory-page")


def memory_report(store: Store, meta: RunMeta) -> MemoryReport | None:
    """A memory run's saved report (computed again from its snapshot if none is saved), or a trace run's from its
    traces' memory events and its saved analysis."""
    if meta.kind == "memory":
        return load_memory_report(store, meta.id) or snapshot_memory(load_snapshot(store, meta.id), run_id=meta.id)
    traces = store.load_traces(meta.id)
    if not traces:
        return None
    try:
        price = resolve_price(first_gpu_model(meta))
        options = MemoryOptions(usd_per_gpu_hour=price.usd_per_gpu_hour, price_source=price.source)
    except (PriceError, CatalogError):
        options = MemoryOptions()
    return trace_memory(traces, options, source=f"run {meta.id}", run_id=meta.id,
                        analysis=store.load_report(meta.id))


def _device(d: DeviceMemory, report: MemoryReport) -> list[Component]:
    key = f"{d.device}-{d.rank if d.rank is not None else 's'}"
    lines = [html.P(peak_line(d), className="memory-peak", id=f"memory-peak-{key}")]
    if d.device_bytes is not None:
        lines.append(html.P(f"Device memory {gib(d.device_bytes)} ({d.device_bytes_source or 'source unknown'}); "
                            f"headroom {gib(d.headroom_bytes)}."))
    f = d.fragmentation
    if f.reserved_unallocated_bytes is not None:
        lines.append(html.P(f"Reserved but not allocated at the peak: {gib(f.reserved_unallocated_bytes)} "
                            f"({pct(f.share_of_reserved)} of reserved); largest free block "
                            f"{gib(f.largest_free_block_bytes)}."))
    out: list[Component] = [html.H2(device_title(d)), *lines,
                            chart(f"memory-timeline-{key}", memory_timeline(d), revision=key),
                            chart(f"memory-makeup-{key}", memory_makeup(d), revision=key)]
    if d.at_peak:
        table = grid.table(f"memory-at-peak-{key}", COLUMNS, rows(d), filters=False, page_size=GROUPS_SHOWN)
        out += [html.H3("Largest allocations live at the peak, by where they were made"), table]
    for o in d.oom:
        out.append(html.P(f"Out of memory: {gib(o.requested_bytes)} requested with {gib(o.allocated_bytes)} "
                          f"allocated and {gib(o.device_free_bytes)} free on the device.", className="warning"))
    if d.advice:
        out.append(html.Ul([_advice(a, report) for a in d.advice], className="memory-advice",
                           id=f"memory-advice-{key}"))
    return out


COLUMNS = (Column("gib", "memory (GiB)", "number", ".4~f"), Column("count", "count", "number", grid.WHOLE),
           Column("category", "category"), Column("where", "where"), Column("source", "made in"))


def rows(d: DeviceMemory) -> list[dict[str, Any]]:
    """One row per place live at the peak, largest first; numbers stay numbers so the columns sort."""
    return [{"gib": round(g.bytes / 2**30, 4), "count": g.count, "category": g.category.replace("_", " "),
             "where": g.label, "source": source(g)} for g in d.at_peak]


def _advice(a: MemoryAdvice, report: MemoryReport) -> html.Li:
    return html.Li([html.B(a.title), html.Br(), a.detail, html.Br(), html.Span(priced_text(a, report),
                                                                                className="dim")],
                   id=f"advice-{a.code}")
