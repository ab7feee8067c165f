"""Pieces every page uses: a chart or its one-line absence, cards, key/value tables, times.

User strings (run names, commands, kernel and frame names, recommendation text) go in as text
children, which React escapes; nothing here renders HTML from a string. Names also go through
``format.printable``, so a control character reads as its escape, as in every other view.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import plotly.graph_objects as go
from dash import dcc, html
from dash.development.base_component import Component

from gpuscope.figures import Absent, ChartResult
from gpuscope.format import gpus_line, printable
from gpuscope.model.run import RunMeta

NA = "n/a"


def chart(key: str, result: ChartResult, *, revision: str) -> Component:
    """The figure, or one line saying why the run has none (never an empty chart)."""
    if isinstance(result, Absent):
        return html.P(f"{_title(key)}: {result.reason}", className="absent", id=f"absent-{key}")
    fig: go.Figure = result
    # Keep the user's zoom and legend choices across a live refresh.
    fig.update_layout(uirevision=revision)
    return html.Div(dcc.Graph(id=f"chart-{key}", figure=fig, config={"displaylogo": False, "responsive": True}),
                    className="chart")


def _title(key: str) -> str:
    return {"steps": "Step time breakdown", "ranks": "Ranks compared", "kernels": "Top kernels",
            "gpu": "GPU timelines", "host": "Host CPU and I/O", "stacks": "Stack samples",
            "waste": "Waste by cause", "compare": "Step time breakdown, A vs B",
            "waterfall": "Step time change", "roofline": "Roofline",
            "arrivals": "Arrival at the collectives"}.get(key, key)


def card(title: str, *children: Component, class_name: str = "") -> html.Section:
    return html.Section([html.H3(title), *children], className=f"card {class_name}".strip())


def kv_table(rows: Sequence[tuple[str, str]], *, table_id: str | None = None) -> html.Table:
    body = [html.Tr([html.Th(k), html.Td(v)]) for k, v in rows]
    return html.Table(html.Tbody(body), className="kv", id=table_id) if table_id else \
        html.Table(html.Tbody(body), className="kv")


def utc(ns: int | None) -> str:
    if ns is None:
        return NA
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ns / 1e9))


def duration_s(meta: RunMeta, now_ns: int | None = None) -> float | None:
    """How long the run lasted; for a run still recording, so far."""
    if meta.ended_ns is not None:
        return (meta.ended_ns - meta.started_ns) / 1e9
    if meta.status == "running":
        return ((now_ns or time.time_ns()) - meta.started_ns) / 1e9
    return None


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return NA
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


CPU_JOB_COST = "CPU only: no GPU time to price."


def gpus_text(meta: RunMeta) -> str:
    if not meta.gpus:  # a trace run without a GPU recorded no GPU activity: a CPU job
        return "CPU only" if meta.kind == "trace" else NA
    return printable(gpus_line([(g.name, g.mig_profile) for g in meta.gpus]))


def gpus_phrase(meta: RunMeta) -> str:
    """"GPUs 2 x NVIDIA H100 80GB HBM3" (or "GPUs n/a"), and "CPU only" for a CPU job."""
    text = gpus_text(meta)
    return text if text == "CPU only" else f"GPUs {text}"


def status_badge(status: str) -> html.Span:
    return html.Span(status, className=f"badge status-{status}")


def nav(pages: Sequence[tuple[str, str]]) -> html.Nav:
    """The menu on every page: the brand, then a link to each of ``pages`` (label, path)."""
    return html.Nav([dcc.Link("gpuscope", href="/", className="brand"),
                     *(dcc.Link(label, href=path, id=f"nav-{label.lower()}") for label, path in pages)])
