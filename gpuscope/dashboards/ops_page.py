"""The `/runs/<id>/ops` tab: time per operator of a trace run, every rank, sortable and filterable, and the
slowest and median step to download as Perfetto traces (`/runs/<id>/timeline/<slowest|median>.json.gz`).

Operator and kernel names go in as plain table cells (text, made printable by ``grid.cells``), never as Markdown or
HTML; the run's name as ``printable`` text.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import quote

from dash import dcc, html
from dash.development.base_component import Component
from flask import Flask, Response, abort

from gpuscope.analyzers.efficiency.ceiling import peak_suspected
from gpuscope.analyzers.efficiency.opwork import op_work
from gpuscope.analyzers.trace.ops import OpStat, OpTable, operator_table
from gpuscope.analyzers.trace.optree import call_tree
from gpuscope.dashboards import grid
from gpuscope.dashboards.data import RunReader, UnknownRun, valid_run_id
from gpuscope.dashboards.errors import plain
from gpuscope.dashboards.grid import Column
from gpuscope.format import flag_text, ms, printable_all
from gpuscope.model.gpu_spec import GpuSpec
from gpuscope.model.trace import RankTrace
from gpuscope.reports.timeline import StepFile, report_step_files
from gpuscope.specs import SpecError, spec_for
from gpuscope.store import StoreError

KERNELS_SHOWN = 3
_TIME_COLUMNS = (("cpu_self_ms", "CPU self (ms)"), ("cpu_total_ms", "CPU total (ms)"),
                 ("gpu_self_ms", "GPU self (ms)"), ("gpu_total_ms", "GPU total (ms)"))
_WORK_COLUMNS = (("gflop", "GFLOP", 2), ("tflops", "TFLOP/s", 2), ("tb_s", "TB/s", 3),
                 ("intensity", "FLOP/byte", 1), ("roofline_pct", "% of roofline", 1))
"""Each operator's counted work (all its calls) against the roofline at its type (docs/views.md)."""


def tabs(run_id: str, *, current: str) -> html.Div:
    """The run's tabs: the report, its operators and its memory."""
    base = f"/runs/{quote(run_id, safe='')}"
    return html.Div([dcc.Link("Report", href=base, className="tab" + (" current" if current == "report" else "")),
                     dcc.Link("Operators", href=f"{base}/ops", id="ops-tab",
                              className="tab" + (" current" if current == "ops" else "")),
                     dcc.Link("Memory", href=f"{base}/memory", id="memory-tab",
                              className="tab" + (" current" if current == "memory" else ""))], className="tabs")


def timeline_links(run_id: str) -> html.P:
    """Download links for the slowest and the median step (the route answers 404 when a run has none)."""
    base = f"/runs/{quote(run_id, safe='')}/timeline"
    return html.P(["Timeline: download the ",
                   html.A("slowest step", href=f"{base}/slowest.json.gz", id="timeline-slowest"), " or the ",
                   html.A("median step", href=f"{base}/median.json.gz", id="timeline-median"),
                   " as a trace to open in ui.perfetto.dev or chrome://tracing."], className="hint")


def layout(reader: RunReader, run_id: str) -> html.Div:
    meta = printable_all(reader.meta(run_id))
    traces = reader.store.load_traces(meta.id)
    head = [html.H1(meta.name or meta.id, id="run-name"), tabs(meta.id, current="ops")]
    if not traces:
        return html.Div([*head, html.P("No profiler trace in this run: operators come from a trace.",
                                       className="absent", id="no-ops")], className="page")
    report = reader.store.load_report(meta.id)
    suspect = report is not None and report.efficiency is not None and peak_suspected(report.efficiency.above_ceiling)
    tables = [_table_with_work(t, _spec(meta.gpu_model), suspect) for t in traces]
    return html.Div([*head, timeline_links(meta.id), *(_summary(t) for t in tables), _table(tables)],
                    className="page")


def _spec(gpu_model: str | None) -> GpuSpec | None:
    """The run's GPU in the spec table; None where it is not (or config.toml's entries cannot be read: the
    roofline is then n/a, the times are still shown)."""
    try:
        return spec_for(gpu_model)
    except SpecError:
        return None


def _table_with_work(trace: RankTrace, spec: GpuSpec | None, suspect_peak: bool = False) -> OpTable:
    tree = call_tree(trace)
    table = operator_table(trace, tree=tree)
    work = op_work(trace, tree, spec, suspect_peak=suspect_peak)
    return replace(table, ops=tuple(replace(o, efficiency=work.get(o.name)) for o in table.ops))


def _summary(table: OpTable) -> html.P:
    steps = f"{table.steps} profiler steps ({ms(table.steps_us)})" if table.steps_us is not None else \
        "no profiler steps"
    return html.P(f"Rank {table.rank}: {len(table.ops)} operators, {steps}; GPU work {ms(table.gpu_us)}, "
                  f"{ms(table.no_operator_gpu_us)} of it launched outside any operator.", className="meta")


def rows(tables: list[OpTable]) -> list[dict[str, Any]]:
    """One row per operator and rank; numbers stay numbers so the columns sort."""
    out = []
    for table in tables:
        for op in table.ops:
            out.append({
                "rank": table.rank, "name": op.name, "calls": op.calls,
                "cpu_self_ms": op.cpu_self_us / 1000, "cpu_total_ms": op.cpu_total_us / 1000,
                "gpu_self_ms": op.gpu_self_us / 1000, "gpu_total_ms": op.gpu_total_us / 1000,
                "gpu_share_pct": op.gpu_share * 100 if op.gpu_share is not None else None,
                **_work_cells(op),
                "kernels": "; ".join(f"{k.name} x{k.calls}" for k in op.kernels[:KERNELS_SHOWN])
                           + (f"; {len(op.kernels) - KERNELS_SHOWN} more" if len(op.kernels) > KERNELS_SHOWN
                              else ""),
            })
    return out


def _work_cells(op: OpStat) -> dict[str, Any]:
    w = op.efficiency
    if w is None:
        return {"gflop": None, "tflops": None, "tb_s": None, "intensity": None, "roofline_pct": None, "dtype": None,
                "ceiling": None}
    # Above a ceiling, the share is not a figure: the column is empty and the flag says why.
    return {"gflop": w.flops / 1e9, "tflops": w.achieved_tflops, "tb_s": w.achieved_tb_s, "intensity": w.intensity,
            "roofline_pct": None if w.roofline_share is None or w.flag is not None else w.roofline_share * 100,
            "dtype": w.dtype, "ceiling": flag_text(w.flag) if w.flag is not None else None}


COLUMNS = (Column("rank", "rank", "number", grid.WHOLE), Column("name", "operator"),
           Column("calls", "calls", "number", grid.WHOLE),
           *(Column(key, label, "number", grid.FIXED_3, sort="desc" if key == "gpu_self_ms" else None)
             for key, label in _TIME_COLUMNS),
           Column("gpu_share_pct", "GPU total, % of steps", "number", ".1f"),
           *(Column(key, label, "number", f".{digits}f") for key, label, digits in _WORK_COLUMNS),
           Column("dtype", "type"), Column("ceiling", "above a ceiling"), Column("kernels", "kernels it launched"))


def _table(tables: list[OpTable]) -> Component:
    """Every rank's operators, by GPU self time (the most first)."""
    return grid.table("ops-table", COLUMNS, sorted(rows(tables), key=lambda r: -r["gpu_self_ms"]), page_size=50)


def add_download_route(server: Flask, reader: RunReader) -> None:
    """``/runs/<id>/timeline/<slowest|median>.json.gz``: the step trace, made from the run's saved trace."""

    @server.route("/runs/<run_id>/timeline/<which>.json.gz")
    def _timeline(run_id: str, which: str) -> Response:
        if which not in ("slowest", "median") or valid_run_id(run_id) is None:
            abort(404)
        try:
            meta = reader.meta(run_id)
            step = _step_file(reader, meta.id, which)
        except UnknownRun:
            abort(404)
        except StoreError as exc:  # a saved trace cut short or overwritten: the store's line, not an error page
            return plain(404, f"no {which} step to download: {exc}")
        if step is None:
            return plain(404, f"no {which} step to download: run {meta.id} has no profiler steps")
        return Response(step.data, mimetype="application/gzip",
                        headers={"Content-Disposition": f'attachment; filename="{step.file_name}"'})


def _step_file(reader: RunReader, run_id: str, which: str) -> StepFile | None:
    return next((f for f in report_step_files(reader.store.load_traces(run_id), run_id) if which in f.step.why),
                None)
