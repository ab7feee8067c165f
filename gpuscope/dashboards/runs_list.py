"""The `/` page: every run in the store, sortable and filterable, with its verdict and cost."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from dash import dcc, html

from gpuscope.dashboards import grid
from gpuscope.dashboards.components import NA, duration_s, gpus_text, utc
from gpuscope.dashboards.data import ReportSummary, RunReader, RunsView, valid_run_id
from gpuscope.dashboards.grid import Column
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
    """The table's rows as it shows them (``grid.cells``): on the page's first drawing and on each refresh."""
    now = time.time_ns()
    return grid.cells([row(meta, summary, now) for meta, summary in view.runs])


COLUMNS = (Column("name", "name", "link"), Column("kind", "kind"), Column("status", "status", emphasis="running"),
           Column("started", "started"), Column("duration_s", "duration (s)", "number", grid.FIXED_3),
           Column("gpus", "GPUs"), Column("verdict", "verdict"),
           Column("total_usd", "total cost", "number", grid.MONEY),
           Column("wasted_usd", "wasted", "number", grid.MONEY))


def layout(reader: RunReader) -> html.Div:
    view = reader.runs()
    data = rows(view)
    live = any(r["status"] == "running" for r in data)
    table = grid.table("runs-table", COLUMNS, data, page_size=50, getRowId="params.data.id",
                       dashGridOptions={"rowSelection": {"mode": "multiRow", "headerCheckbox": False,
                                                         "enableClickSelection": False}})
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


def compare_href(selected: list[dict[str, Any]] | None) -> tuple[str, str]:
    """The compare link for the two selected rows (oldest as A), and its CSS class."""
    ids = [r.get("id") for r in (selected or []) if isinstance(r, dict)]
    chosen = [i for i in ids if isinstance(i, str) and valid_run_id(i)]
    if len(chosen) != 2:
        return "/compare", "disabled"
    a, b = sorted(chosen)
    return f"/compare?a={a}&b={b}", ""
