"""`gpuscope runs`: the saved runs, newest first."""

from __future__ import annotations

import time

import msgspec
import typer
from rich.table import Table

from gpuscope.cli.common import open_store, stdout, write_json


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)


def runs(json_out: bool = typer.Option(False, "--json", help="Print the list as JSON.")) -> None:
    """List saved runs: id, name, kind, status, pid, started, samples."""
    with open_store() as store:
        metas = store.list_runs()
        counts = store.sample_counts()
    if json_out:
        rows = [{"id": m.id, "name": m.name, "kind": m.kind, "status": m.status, "pid": m.pid,
                 "started_ns": m.started_ns, "ended_ns": m.ended_ns, "samples": counts.get(m.id, 0),
                 "gpus": [g.name for g in m.gpus]} for m in metas]
        write_json(msgspec.json.encode(rows))
        return
    if not metas:
        stdout.print("No runs yet. Try `gpuscope analyze TRACE` or `gpuscope attach PID`.")
        return
    table = Table(box=None, header_style="bold")
    for col in ("id", "name", "kind", "status", "pid", "started", "samples"):
        table.add_column(col, justify="right" if col in ("pid", "samples") else "left", no_wrap=col == "id")
    for m in metas:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(m.started_ns / 1e9))
        table.add_row(m.id, m.name, m.kind, m.status, "" if m.pid is None else str(m.pid), started,
                      str(counts.get(m.id, 0)))
    stdout.print(table)
