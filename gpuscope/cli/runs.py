"""`gpuscope runs`: the saved runs, newest first."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import typer
from rich.table import Table

from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.cli.common import open_store, stdout, write_json
from gpuscope.format import pct, usd
from gpuscope.model.report import Report


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)


def runs(json_out: bool = typer.Option(False, "--json", help="Print the list as JSON.")) -> None:
    """List saved runs: id, name, kind, status, verdict, GPU busy, cost, started, samples."""
    with open_store() as store:
        metas = store.list_runs()
        counts = store.sample_counts()
        reports = {m.id: store.load_report(m.id) for m in metas}
    if json_out:
        rows = [{"id": m.id, "name": m.name, "kind": m.kind, "status": m.status, "pid": m.pid,
                 "started_ns": m.started_ns, "ended_ns": m.ended_ns, "samples": counts.get(m.id, 0),
                 "gpus": [g.name for g in m.gpus], **_summary(reports[m.id])} for m in metas]
        write_json(msgspec.json.encode(rows))
        return
    if not metas:
        stdout.print("No runs yet. Try `gpuscope analyze TRACE` or `gpuscope attach PID`.")
        return
    table = Table(box=None, header_style="bold")
    for col in ("id", "name", "kind", "status", "verdict", "GPU busy", "cost", "started", "samples"):
        table.add_column(col, justify="right" if col in ("GPU busy", "cost", "samples") else "left",
                         no_wrap=col == "id")
    for m in metas:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(m.started_ns / 1e9))
        s = _summary(reports[m.id])
        verdict = str(s["verdict"] or "n/a").replace("_", " ")
        table.add_row(m.id, m.name, m.kind, m.status, verdict, pct(s["gpu_busy"]), usd(s["total_usd"]), started,
                      str(counts.get(m.id, 0)))
    stdout.print(table)


def _summary(report: Report | None) -> dict[str, Any]:
    """What a script needs to pick or compare runs: the verdict's stage, GPU busy and the cost (null if unknown)."""
    if report is None:
        return {"verdict": None, "gpu_busy": None, "total_usd": None, "wasted_usd": None}
    cost = report.cost
    return {"verdict": report.verdict.primary, "gpu_busy": facts_of(report).gpu_busy,
            "total_usd": cost.total_usd if cost is not None else None,
            "wasted_usd": cost.wasted_usd if cost is not None else None}
