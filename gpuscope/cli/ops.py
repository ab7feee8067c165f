"""`gpuscope ops TRACE_OR_RUN`: time per PyTorch operator, per rank, with the kernels each launched."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import typer

from gpuscope.analyzers.trace.ops import SORT_KEYS, OpTable, sort_ops
from gpuscope.cli.common import JsonOption, StepRangeOption, fail, stdout, write_json
from gpuscope.cli.ops_work import rank_tables, run_work
from gpuscope.cli.trace_target import load_target
from gpuscope.model.codec import to_json
from gpuscope.model.efficiency import Efficiency
from gpuscope.reports.ops_work import render_ops_with_work, render_run_work

SCHEMA = "gpuscope.ops/1"
DEFAULT_TOP = 20


def register(app: typer.Typer) -> None:
    app.command("ops")(ops)


def ops(
    target: str = typer.Argument(..., metavar="TRACE_OR_RUN",
                                 help="A trace file, a directory of rank files, or a saved run id (or prefix)."),
    rank: int | None = typer.Option(None, "--rank", help="Only this rank (default: every rank)."),
    step_range: StepRangeOption = None,
    sort: str = typer.Option("gpu_self", "--sort", help=f"Order by one of: {', '.join(SORT_KEYS)}."),
    top: int | None = typer.Option(None, "--top", min=0,
                                   help=f"Operators per rank; 0 for all (default: {DEFAULT_TOP}, all with --json)."),
    kernels: int = typer.Option(3, "--kernels", min=0, help="Kernels shown under each operator."),
    json_out: JsonOption = False,
) -> None:
    """Time per PyTorch operator (CPU and GPU, self and total), its kernels, calls and share of the steps; the
    FLOPs and roofline of each operator and kernel family, and the run's MFU."""
    if sort not in SORT_KEYS:
        fail(f"--sort {sort}: use one of {', '.join(SORT_KEYS)}")
    chosen = load_target(target, rank=rank, step_range=step_range)
    limit = (None if json_out else DEFAULT_TOP) if top is None else (top or None)
    work = run_work(chosen)
    tables = [replace(table, ops=sort_ops(table.ops, sort)) for table in rank_tables(chosen, work)]
    if json_out:
        write_json(to_json(ops_document(chosen.label, tables, sort=sort, top=limit, efficiency=work.efficiency,
                                        warnings=chosen.warnings)))
        return
    render_run_work(work.efficiency, stdout)
    render_ops_with_work(tables, stdout, sort=sort, top=limit, kernels=kernels)


def ops_document(source: str, tables: list[OpTable], *, sort: str, top: int | None,
                 efficiency: Efficiency | None = None, warnings: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``--json`` object: each rank's table, its operators in ``sort`` order (the first ``top``), the run's
    efficiency (MFU, its peak and source, or why it is n/a), and what reading the traces left out (``warnings``,
    as a report's)."""
    return {"schema": SCHEMA, "source": source, "sort": sort,
            "ranks": [replace(t, ops=t.ops if top is None else t.ops[:top]) for t in tables],
            "efficiency": efficiency, "warnings": list(warnings)}
