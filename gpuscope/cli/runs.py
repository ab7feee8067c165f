"""`gpuscope runs`: the saved runs, newest first."""

from __future__ import annotations

import sys
import time
from typing import Any

import msgspec
import typer
from rich.table import Table
from rich.text import Text

from gpuscope.analyzers import consistency
from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.cli.common import EXIT_USAGE, open_store, stdout, write_json
from gpuscope.format import pct, printable, usd
from gpuscope.model.report import Report
from gpuscope.model.run import RunMeta
from gpuscope.store import Store, StoreDamaged, StoreError


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)


def runs(json_out: bool = typer.Option(False, "--json", help="Print the list as JSON.")) -> None:
    """List saved runs: id, name, kind, status, verdict, GPU busy, cost, started, samples.

    Runs that cannot be read (a damaged store or row) are left out with one line each on stderr, and the exit
    status is then 2."""
    with open_store() as store:
        listing = store.listing()
        metas = listing.runs
        problems = list(listing.problems)
        counts = _counts(store, [m.id for m in metas], problems)
        reports = {m.id: _report(store, m.id, problems) for m in metas}
    if json_out:
        rows = [{"id": m.id, "name": m.name, "kind": m.kind, "status": m.status, "pid": m.pid,
                 "started_ns": m.started_ns, "ended_ns": m.ended_ns, "samples": counts[m.id],
                 "gpus": [g.name for g in m.gpus], **_summary(reports[m.id])} for m in metas]
        write_json(msgspec.json.encode(rows))
    else:
        _table(metas, counts, reports, complete=not problems)
    for line in dict.fromkeys(problems):  # one line for each problem, however many runs it hid
        print(f"gpuscope: error: {line}", file=sys.stderr)
    if problems:
        raise typer.Exit(EXIT_USAGE)


def _table(metas: tuple[RunMeta, ...], counts: dict[str, int | None], reports: dict[str, Report | None], *,
           complete: bool) -> None:
    if not metas:
        stdout.print("No runs yet. Try `gpuscope analyze TRACE` or `gpuscope attach PID`." if complete else
                     "No run in this store can be read.")
        return
    rows = [_row(m, counts[m.id], reports[m.id]) for m in metas]
    if stdout.width >= WIDE_COLUMNS:
        table = Table(box=None, header_style="bold")
        for col in _COLUMNS:
            table.add_column(col, justify="right" if col in ("GPU busy", "cost", "samples") else "left",
                             no_wrap=col == "id", overflow="fold")
        for row in rows:
            table.add_row(*row)
        stdout.print(table)
        return
    # Narrower (a CI log, a pipe at 80 columns): one run per entry, its facts as words that wrap.
    for run_id, name, *facts in rows:
        stdout.print(Text.assemble((run_id, "cyan"), "  ", name))
        stdout.print(Text("  " + " · ".join(f"{col} {value}" if col in ("GPU busy", "cost", "started", "samples")
                                            else value for col, value in zip(_COLUMNS[2:], facts, strict=True))))


WIDE_COLUMNS = 110
"""Below this width ``runs`` lists each run on its own lines instead of a table whose cells would break words."""
_COLUMNS = ("id", "name", "kind", "status", "verdict", "GPU busy", "cost", "started", "samples")


def _row(m: RunMeta, count: int | None, report: Report | None) -> tuple[str, ...]:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(m.started_ns / 1e9))
    s = _summary(report)
    verdict = str(s["verdict"] or "no verdict").replace("_", " ")
    return (printable(m.id), printable(m.name), printable(m.kind), printable(m.status), verdict,
            pct(s["gpu_busy"]), usd(s["total_usd"]), started, "n/a" if count is None else str(count))


def _counts(store: Store, run_ids: list[str], problems: list[str]) -> dict[str, int | None]:
    """Samples per run; where the counts of all cannot be read at once, each run's alone (None: unreadable)."""
    try:
        every = store.sample_counts()
        return {run_id: every.get(run_id, 0) for run_id in run_ids}
    except StoreError:
        pass
    counts: dict[str, int | None] = {}
    for run_id in run_ids:
        try:
            counts[run_id] = store.sample_count(run_id)
        except StoreError as exc:
            counts[run_id] = None
            problems.append(_problem(store, exc))
    return counts


def _report(store: Store, run_id: str, problems: list[str]) -> Report | None:
    try:
        report = store.load_report(run_id)
    except StoreError as exc:
        problems.append(_problem(store, exc))
        return None
    return None if report is None else consistency.enforce(report)  # its verdict as `gpuscope show` gives it


def _problem(store: Store, exc: StoreError) -> str:
    """A damaged file is one line for the whole listing, not one for each run it hides a part of."""
    return store.damage if isinstance(exc, StoreDamaged) and store.damage else str(exc)


def _summary(report: Report | None) -> dict[str, Any]:
    """What a script needs to pick or compare runs: the verdict's stage, GPU busy and the cost (null if unknown)."""
    if report is None:
        return {"verdict": None, "gpu_busy": None, "total_usd": None, "wasted_usd": None}
    cost = report.cost
    return {"verdict": report.verdict.primary, "gpu_busy": facts_of(report).gpu_busy,
            "total_usd": cost.total_usd if cost is not None else None,
            "wasted_usd": cost.wasted_usd if cost is not None else None}
