"""The HTML report's memory section: per device the peak against the device's size, the timeline with the peak
marked, what the memory held then, the largest allocations live then with their source lines, and the advice;
and the whole document for a memory run (a snapshot, which has no other section)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from markupsafe import Markup

from gpuscope.figures.memory import device_title, memory_makeup, memory_timeline
from gpuscope.format import gib, pct
from gpuscope.model.memory import DeviceMemory, MemoryAdvice, MemoryReport, PeakGroup
from gpuscope.reports.html_blocks import CSP, CSS, Cell, Charts, html, join, table
from gpuscope.reports.memory import peak_line, priced_text, short_path, shown_source

GROUPS_LISTED = 15


def section(report: MemoryReport, charts: Charts) -> Markup:
    """The section; empty when the recording holds no GPU memory."""
    if not report.devices:
        return Markup()
    parts = [Markup('<h2 id="memory-detail">Memory at the peak</h2>')]
    parts += [_device(d, report, charts) for d in report.devices]
    parts += [html('<p class="warning">{}</p>', w) for w in report.warnings]
    return join(parts)


def _device(d: DeviceMemory, report: MemoryReport, charts: Charts) -> Markup:
    out = [html('<h3>{}</h3><p class="memory-peak">{}</p>', device_title(d), peak_line(d))]
    if d.device_bytes is not None:
        out.append(html("<p>Device memory {} ({}); headroom {}.</p>", gib(d.device_bytes),
                        d.device_bytes_source or "source unknown", gib(d.headroom_bytes)))
    f = d.fragmentation
    if f.reserved_unallocated_bytes is not None:
        out.append(html("<p>Reserved but not allocated at the peak: {} ({} of reserved); largest free block {}.</p>",
                        gib(f.reserved_unallocated_bytes), pct(f.share_of_reserved), gib(f.largest_free_block_bytes)))
    out.append(charts.block(f"memory-timeline-{d.device}", memory_timeline(d)))
    out.append(charts.block(f"memory-makeup-{d.device}", memory_makeup(d)))
    if d.at_peak:
        out.append(Markup("<h4>Largest allocations live at the peak, by where they were made</h4>"))
        out.append(groups_table(d.at_peak[:GROUPS_LISTED], table_id=f"memory-at-peak-{d.device}"))
    for o in d.oom:
        out.append(html('<p class="warning">Out of memory: {} requested with {} allocated and {} free on the '
                        "device.</p>", gib(o.requested_bytes), gib(o.allocated_bytes), gib(o.device_free_bytes)))
        if o.live:
            out.append(groups_table(o.live, table_id=f"memory-oom-{d.device}"))
    if d.advice:
        out.append(html("<ul class=\"memory-advice\">{}</ul>", join(_advice(a, report) for a in d.advice)))
    return join(out)


def groups_table(groups: tuple[PeakGroup, ...], *, table_id: str) -> Markup:
    rows: list[list[Cell]] = [[gib(g.bytes), f"{g.count:,}", g.category.replace("_", " "), g.label, source(g)]
                              for g in groups]
    return table(["memory", "count", "category", "where", "made in"], rows, numeric={0, 1}, table_id=table_id)


def source(g: PeakGroup, frames: int = 4) -> str:
    """The call path of a place: its Python frames, innermost first (or its op)."""
    shown = [f"{f.name} ({short_path(f.filename)}:{f.line})" for f in g.frames or () if ".py" in f.filename]
    if not shown and g.frames:
        shown = [f.name for f in g.frames[:2]]
    path = " < ".join(shown[:frames])
    return f"{g.op} · {path}" if g.op and path else g.op or path or "n/a"


def _advice(a: MemoryAdvice, report: MemoryReport) -> Markup:
    return html('<li data-code="{}"><b>{}</b><br>{}<br><span class="dim">{}</span></li>', a.code, a.title, a.detail,
                priced_text(a, report))


def render_memory_html(report: MemoryReport, *, generated_ns: int | None = None) -> str:
    """A memory run's report as one self-contained HTML file."""
    charts = Charts()
    body = section(report, charts)
    shown = shown_source(report)
    when = datetime.fromtimestamp((generated_ns or time.time_ns()) / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = html('<header><h1 id="run-name">gpuscope memory: {}</h1><p class="meta">{} {} · run {} · written {}</p>'
                "</header>", shown, report.kind, shown, report.run_id or "not saved", when)
    return str(html('<!doctype html>\n<html lang="en" data-charts="loading"><head><meta charset="utf-8">'
                    '<meta http-equiv="Content-Security-Policy" content="{}">'
                    '<meta name="viewport" content="width=device-width, initial-scale=1">'
                    "<title>gpuscope memory: {}</title><style>{}</style></head><body>{}{}</body></html>\n",
                    Markup(CSP), shown, Markup(CSS), head + body, charts.scripts()))
