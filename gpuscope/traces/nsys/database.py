"""An Nsight Systems SQLite export opened for reading: read-only, bounded, and probed for what it holds.

The file is opened read-only and immutable (no lock, no journal, nothing written beside it), only when it is a
regular file of at most the trace cap (``GPUSCOPE_MAX_TRACE_GIB``), and every query is stopped at the command's
deadline. Tables and columns differ between nsys releases (``EXPORT_META_DATA`` became ``META_DATA_EXPORT``, kernels
gained ``greenContextId``, NVTX gained ``jsonText``), so what is there is read first, and each query asks only for
columns the file has.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuscope.net.deadline import Timeouts
from gpuscope.traces.errors import RemoteTimeout, TraceError
from gpuscope.traces.limits import ENV_MAX_TRACE_GIB, open_regular
from gpuscope.traces.nsys.magic import SQLITE_MAGIC

PROGRESS_STEPS = 20_000
"""SQLite virtual-machine steps between two looks at the deadline (a few milliseconds of work)."""
NSYS_MARKERS = frozenset({"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS",
                          "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", "META_DATA_EXPORT",
                          "EXPORT_META_DATA"})
"""Tables only an Nsight Systems export has; with ``StringIds``, one of them makes a file one."""
WANTED = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "kernels",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "copies",
    "CUPTI_ACTIVITY_KIND_MEMSET": "memsets",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "CUDA API calls (launches and syncs)",
    "NVTX_EVENTS": "NVTX ranges (steps, annotations)",
    "TARGET_INFO_GPU": "GPU models",
}
"""The tables the analysis reads, and what a report lacks without each (named in one line when missing)."""


@dataclass(frozen=True)
class Export:
    """An open export: its connection, the columns of each table, and the nsys release that wrote it."""

    label: str
    """The file as messages name it."""
    conn: sqlite3.Connection
    columns: dict[str, frozenset[str]]
    """Each table's columns."""
    version: str | None
    """``EXPORT_PRODUCT_VERSION`` (e.g. "2024.6.2.25"); None when the file does not say."""

    def has(self, table: str, *columns: str) -> bool:
        cols = self.columns.get(table)
        return cols is not None and all(c in cols for c in columns)

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """A query's rows (an SQLite error, raised here or while they are read, is turned into a TraceError by
        ``open_export``)."""
        return self.conn.execute(sql, params)

    def numbers(self, sql: str, fields: tuple[str, ...], *, table: str) -> list[npt.NDArray[np.int64]]:
        """The query's rows as one int64 column per field, taken by numpy straight from the cursor; a TraceError
        naming ``table`` when a value is not a whole number (text, a blob, NULL, past 64 bits)."""
        try:
            rows = np.fromiter(self.rows(sql), dtype=np.dtype([(f, np.int64) for f in fields]))
        except (ValueError, TypeError, OverflowError) as exc:
            raise TraceError(self.label, f"{table} holds a value that is not a whole number where nsys writes one "
                                         f"({exc})") from None
        return [np.ascontiguousarray(rows[f]) for f in fields]

    def missing_line(self) -> str | None:
        """One line naming the tables the analysis reads that this export lacks, and what that leaves out."""
        gone = [f"{table} ({what})" for table, what in WANTED.items() if table not in self.columns]
        if not gone:
            return None
        return f"this Nsight Systems export has no {', no '.join(gone)}: the report leaves them out"


def check_file(path: Path, cap: int) -> None:
    """A TraceError unless ``path`` is a regular file of at most ``cap`` bytes that starts as an SQLite database."""
    with open_regular(path, what="a trace file", max_bytes=cap,
                      per=f"per trace file (set {ENV_MAX_TRACE_GIB} to raise it)") as f:
        if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
            raise TraceError(path, "not an SQLite database (an Nsight Systems export starts as one)")


@contextmanager
def open_export(path: Path, *, label: str, timeouts: Timeouts | None) -> Iterator[Export]:
    """The export at ``path`` (checked by ``check_file`` first), closed when the block ends. TraceError (one line)
    for a file that SQLite cannot read or that is no Nsight Systems export; RemoteTimeout when a query runs past
    ``timeouts``' deadline."""
    uri = f"{path.absolute().as_uri()}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        raise _error(label, exc) from exc
    try:
        if timeouts is not None:
            deadline = timeouts.deadline
            conn.set_progress_handler(lambda: int(deadline.expired or deadline.cancelled), PROGRESS_STEPS)
        try:
            yield _probe(conn, label)
        except sqlite3.Error as exc:
            if timeouts is not None and str(exc) == "interrupted":
                raise RemoteTimeout(label, f"not read within {timeouts.deadline.seconds:g} s, the limit of the "
                                           "whole command (--timeout)") from None
            raise _error(label, exc) from exc
    finally:
        conn.close()


def _probe(conn: sqlite3.Connection, label: str) -> Export:
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    columns = {n: frozenset(r[1] for r in conn.execute(f'PRAGMA table_info("{_quoted(n)}")')) for n in names}
    if "StringIds" not in columns or not NSYS_MARKERS & columns.keys():
        raise TraceError(label, "an SQLite database, but not an Nsight Systems export (no StringIds, "
                                "CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS tables)", not_a_trace=True)
    version = None
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if {"name", "value"} <= columns.get(table, frozenset()):
            row = conn.execute(f"SELECT value FROM {table} WHERE name = 'EXPORT_PRODUCT_VERSION'").fetchone()
            version = str(row[0]) if row and row[0] is not None else None
            break
    return Export(label=label, conn=conn, columns=columns, version=version)


def _quoted(name: str) -> str:
    return name.replace('"', '""')


def _error(label: str, exc: sqlite3.Error) -> TraceError:
    words = str(exc) or type(exc).__name__
    if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in words or "not a database" in words):
        return TraceError(label, f"a damaged SQLite database ({words}): export it again with nsys export")
    return TraceError(label, f"cannot be read as an SQLite database ({words})")
