"""The `/` page: every run in the store, sortable and filterable, with its verdict and cost."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from dash import dash_table, dcc, html
from dash.dash_table.Format import Format, Scheme

from gpuscope.dashboards.components import NA, duration_s, gpus_text, utc
from gpuscope.dashboards.data import ReportSummary, RunReader, RunsView
from gpuscope.format import markdown_text
from gpuscope.model.run import RunMeta

REFRESH_MS = 5000


def row(meta: RunMeta, summary: ReportSummary | None, now_ns: int) -> dict[str, Any]:
    """One table row; numbers stay numbers so the columns sort, None prints as n/a."""
    name = markdown_text(meta.name or meta.id)
    return {
        "id": meta.id,
        "name": f"[{name}](/runs/{quote(meta.id, safe='')})",
        "kind": meta.kind,
        "status": meta.status,
        "started": utc(meta.started_ns),
        "duration_s": duration_s(meta, now_ns),
        "gpus": gpus_text(meta),
        "verdict": summary.verdict if summary is not None else NA,
        "total_usd": summary.total_usd if summary is not None else None,
        "wasted_usd": summary.wasted_usd if summary is not None else None,
    }


def rows(view: RunsView) -> list[dict[str, Any]]:
    now = time.time_ns()
    return [row(meta, summary, now) for meta, summary in view.runs]


def _money() -> dict[str, Any]:
    # Up to 4 decimals with trailing zeros trimmed: a $0.0012 trace run must not read "$0.00".
    return {"locale": {"symbol": ["$", ""]}, "nully": NA, "prefix": None, "specifier": "$,.4~f"}


def columns() -> list[dict[str, Any]]:
    text = [("kind", "kind"), ("status", "status"), ("started", "started")]
    return [
        {"name": "name", "id": "name", "presentation": "markdown"},
        *({"name": label, "id": key} for key, label in text),
        {"name": "duration (s)", "id": "duration_s", "type": "numeric",
         "format": Format(precision=3, scheme=Scheme.fixed, nully=NA)},  # type: ignore[no-untyped-call]
        {"name": "GPUs", "id": "gpus"},
        {"name": "verdict", "id": "verdict"},
        {"name": "total cost", "id": "total_usd", "type": "numeric", "format": _money()},
        {"name": "wasted", "id": "wasted_usd", "type": "numeric", "format": _money()},
    ]


def layout(reader: RunReader) -> html.Div:
    view = reader.runs()
    data = rows(view)
    live = any(r["status"] == "running" for r in data)
    table = dash_table.DataTable(  # type: ignore[attr-defined]
        id="runs-table", columns=columns(), data=data, sort_action="native", filter_action="native",
        sort_by=[], page_size=50, row_selectable="multi", selected_row_ids=[],
        markdown_options={"html": False, "link_target": "_self"},
        style_as_list_view=True,
        style_table={"overflowX": "auto"},
        style_cell={"textAlign": "left", "padding": "6px 10px", "fontSize": "14px", "whiteSpace": "normal",
                    "height": "auto", "maxWidth": "360px",
                    "fontFamily": 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif'},
        style_header={"fontWeight": "600", "backgroundColor": "#f4f5f7"},
        style_data_conditional=[{"if": {"filter_query": "{status} = running", "column_id": "status"},
                                 "color": "#1a7f37", "fontWeight": "600"}],
        style_cell_conditional=[{"if": {"column_id": c}, "textAlign": "right"}
                                for c in ("duration_s", "total_usd", "wasted_usd")],
    )
    empty = html.P("No runs yet: record one with `gpuscope attach PID` or `gpuscope analyze TRACE_DIR`."
                   if not view.problems else "No run in this store can be read.",
                   className="absent", id="no-runs") if not data else None
    problems = html.Div([html.P(f"warning: {line}", className="warning") for line in view.problems],
                        id="store-problems") if view.problems else None
    return html.Div([
        html.H1("Runs"),
        problems,
        html.P(["Select two runs to ", html.A("compare them", id="compare-link", className="disabled",
                                              href="/compare"), "."], className="hint"),
        empty, table,
        dcc.Interval(id="runs-tick", interval=REFRESH_MS, disabled=not live),
    ], className="page")


def compare_href(selected: list[str] | None) -> tuple[str, str]:
    """The compare link for the two selected rows (oldest as A), and its CSS class."""
    chosen = [s for s in (selected or []) if isinstance(s, str)]
    if len(chosen) != 2:
        return "/compare", "disabled"
    a, b = sorted(chosen)
    return f"/compare?a={a}&b={b}", ""
