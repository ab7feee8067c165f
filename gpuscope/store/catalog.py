"""The run catalog read back: each row checked into a ``RunMeta`` (a damaged row is named, never a traceback), and
a damaged table read row by row, so the runs around a damaged page stay listed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from gpuscope.model.codec import from_builtins
from gpuscope.model.run import RunMeta
from gpuscope.store.database import Database
from gpuscope.store.errors import RecordDamaged, StoreDamaged

RUN_COLS = "id, name, kind, status, started_ns, ended_ns, host, command, pid, gpus, price_source, tags"
_CHUNK = 64


@dataclass(frozen=True)
class Listing:
    """The runs of a store that can be read, newest first, and one line for each kind of thing that could not."""

    runs: tuple[RunMeta, ...]
    problems: tuple[str, ...] = ()


def decode(row: Sequence[Any], db: Database) -> RunMeta:
    """One catalog row (``RUN_COLS``) as a RunMeta; ``RecordDamaged`` when a field has the wrong shape."""
    run_id = row[0]
    try:
        (_, name, kind, status, started_ns, ended_ns, host, command, pid, gpus, price_source, tags) = row
        fields = {"id": run_id, "name": name, "kind": kind, "status": status, "started_ns": started_ns,
                  "ended_ns": ended_ns, "host": host, "command": json.loads(command or "[]"), "pid": pid,
                  "gpus": json.loads(gpus or "[]"), "price_source": price_source, "tags": json.loads(tags or "{}")}
        return from_builtins(fields, RunMeta)
    except (ValueError, TypeError, RecursionError, msgspec.ValidationError) as exc:
        raise RecordDamaged(f"the catalog entry of run {run_id!r} in {db.path} cannot be read ({_short(exc)});"
                            " the other runs are not affected; restore the store from a backup to get it back"
                            ) from None


def read(db: Database) -> Listing:
    """The catalog's rows, newest first."""
    lost: list[str] = []
    try:
        rows = db.read(f"SELECT {RUN_COLS} FROM runs ORDER BY started_ns DESC, id DESC", what="the run catalog")
    except StoreDamaged:
        rows, lost = _row_by_row(db)
    runs, bad = [], []
    for row in rows:
        try:
            runs.append(decode(row, db))
        except RecordDamaged as exc:
            bad.append((str(row[0]), str(exc)))
    problems = [db.damaged_line()] if db.damage is not None else []
    if lost:
        problems.append(f"the catalog entries of {len(lost)} runs in {db.path} are on damaged pages and cannot be"
                        f" read: {', '.join(lost[:5])}{' ...' if len(lost) > 5 else ''}")
    if bad:
        problems.append(bad[0][1] if len(bad) == 1 else
                        f"the catalog entries of {len(bad)} runs in {db.path} cannot be read"
                        f" ({', '.join(i for i, _ in bad[:5])}{' ...' if len(bad) > 5 else ''}); the other runs are"
                        " not affected; restore the store from a backup to get them back")
    runs.sort(key=lambda m: (m.started_ns, m.id), reverse=True)
    return Listing(runs=tuple(runs), problems=tuple(problems))


def _row_by_row(db: Database) -> tuple[list[Any], list[str]]:
    """What can be read of a damaged catalog: its rows found through the id index (or by rowid up to the
    largest), read a chunk at a time, and one at a time where a chunk fails; and the ids known but not read."""
    try:  # a covering read of the id index: touches none of the table's own pages
        known = db.read("SELECT rowid, id FROM runs INDEXED BY sqlite_autoindex_runs_1", what="the run catalog")
    except StoreDamaged:
        known = []
    rowids = sorted(r[0] for r in known)
    if not rowids:
        try:
            top = db.read("SELECT max(rowid) FROM runs", what="the run catalog")[0][0]
        except StoreDamaged:
            top = None
        rowids = list(range(1, int(top) + 1)) if isinstance(top, int) else []
    rows: list[Any] = []
    for start in range(0, len(rowids), _CHUNK):
        chunk = rowids[start:start + _CHUNK]
        rows += _read_rows(db, chunk)
    read_ids = {r[0] for r in rows}
    return rows, [str(i) for _, i in known if i not in read_ids]


def _read_rows(db: Database, rowids: list[int]) -> list[Any]:
    sql = f"SELECT {RUN_COLS} FROM runs WHERE rowid IN ({', '.join('?' * len(rowids))})"
    try:
        return db.read(sql, rowids, what="the run catalog")
    except StoreDamaged:
        if len(rowids) == 1:
            return []
    return [row for rowid in rowids for row in _read_rows(db, [rowid])]


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 160 else text[:159] + "…"
