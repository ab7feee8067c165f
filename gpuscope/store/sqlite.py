"""The embedded run store: SQLite in WAL mode plus a folder per run for large artifacts.

WAL lets one writer (a collector) and any number of readers (``gpuscope runs``, the dashboard)
in other processes work at once. A run whose writer died without closing it (``kill -9``) is
marked ``interrupted`` the next time the store is opened; its samples stay.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

from gpuscope.model.codec import from_builtins, report_from_json, to_json
from gpuscope.model.report import Report
from gpuscope.model.run import GpuInfo, Run, RunMeta, RunStatus, StackSamples
from gpuscope.model.schema import SAMPLE_COLUMNS, SampleRow, StackRow
from gpuscope.store import blocks, migrations
from gpuscope.store.tracefile import load_traces, place_trace, save_traces

STAGING_MAX_AGE_S = 24 * 3600


class StoreError(Exception):
    """A store problem a user can act on (bad home folder, unknown run id, ...)."""


def default_home() -> Path:
    return Path(os.environ.get("GPUSCOPE_HOME") or Path.home() / ".gpuscope")


def new_run_id(now_ns: int | None = None) -> str:
    """Sortable by start time, unique without coordination: ``20261202-113200-1a2b3c``."""
    now = time.gmtime((now_ns if now_ns is not None else time.time_ns()) // 1_000_000_000)
    return time.strftime("%Y%m%d-%H%M%S", now) + "-" + secrets.token_hex(3)


def _process_token(pid: int) -> str | None:
    """A pid plus its start time: tells a live writer from a recycled pid."""
    import psutil  # only where a live writer is involved: trace analyses never need it

    try:
        return f"{pid}:{psutil.Process(pid).create_time():.3f}"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


class Store:
    """The run store under ``home`` (``GPUSCOPE_HOME``, default ``~/.gpuscope``)."""

    def __init__(self, home: Path | str | None = None) -> None:
        self.home = Path(home) if home is not None else default_home()
        try:
            (self.home / "runs").mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.home / "gpuscope.db", timeout=10.0, check_same_thread=False,
                                       isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the run store at {self.home}: {exc}") from exc
        self._lock = threading.RLock()
        self._host = socket.gethostname()
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=10000")
            migrations.migrate(self._db)
            self._mark_orphans_interrupted()
        except sqlite3.Error as exc:
            raise StoreError(f"the run store at {self.home} is not usable: {exc}") from exc

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def run_dir(self, run_id: str) -> Path:
        path = self.home / "runs" / run_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    # -- catalog ---------------------------------------------------------------------------

    def create_run(self, meta: RunMeta) -> RunMeta:
        """Add a run to the catalog. A ``running`` run is owned by this process until closed."""
        host = meta.host or self._host
        meta = replace(meta, host=host)
        writer = _process_token(os.getpid()) if meta.status == "running" else None
        with self._tx() as db:
            db.execute(
                "INSERT INTO runs (id, name, kind, status, started_ns, ended_ns, host, command, pid, gpus,"
                " price_source, tags, writer, heartbeat_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (meta.id, meta.name, meta.kind, meta.status, meta.started_ns, meta.ended_ns, host,
                 json.dumps(list(meta.command)), meta.pid, json.dumps([asdict(g) for g in meta.gpus]),
                 meta.price_source, json.dumps(meta.tags), writer, time.time_ns()),
            )
        return meta

    def update_run(self, run_id: str, *, status: RunStatus | None = None, ended_ns: int | None = None,
                   gpus: Sequence[GpuInfo] | None = None, pid: int | None = None,
                   price_source: str | None = None, tags: dict[str, str] | None = None) -> None:
        sets: dict[str, Any] = {}
        if status is not None:
            sets["status"] = status
            if status != "running":
                sets["writer"] = None
        if ended_ns is not None:
            sets["ended_ns"] = ended_ns
        if gpus is not None:
            sets["gpus"] = json.dumps([asdict(g) for g in gpus])
        if pid is not None:
            sets["pid"] = pid
        if price_source is not None:
            sets["price_source"] = price_source
        if tags is not None:
            sets["tags"] = json.dumps(tags)
        if not sets:
            return
        with self._tx() as db:
            db.execute(f"UPDATE runs SET {', '.join(f'{k} = ?' for k in sets)} WHERE id = ?",
                       (*sets.values(), run_id))

    def heartbeat(self, run_id: str, ts_ns: int | None = None) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET heartbeat_ns = ? WHERE id = ?", (ts_ns or time.time_ns(), run_id))

    def list_runs(self) -> list[RunMeta]:
        """All runs, newest first."""
        with self._lock:
            rows = self._db.execute(f"SELECT {_RUN_COLS} FROM runs ORDER BY started_ns DESC, id DESC").fetchall()
        return [_meta_from_row(r) for r in rows]

    def resolve(self, run_id: str) -> str:
        """The full id of a run named by its id or a unique prefix of it."""
        with self._lock:
            rows = self._db.execute("SELECT id FROM runs WHERE id = ? OR id LIKE ? ESCAPE '\\' LIMIT 3",
                                    (run_id, _like_prefix(run_id))).fetchall()
        ids = sorted({r[0] for r in rows})
        if run_id in ids:
            return run_id
        if not ids:
            raise StoreError(f"no run with id {run_id!r} in {self.home} (see `gpuscope runs`)")
        if len(ids) > 1:
            raise StoreError(f"run id prefix {run_id!r} is ambiguous: {', '.join(ids)} ...")
        return str(ids[0])

    def get_meta(self, run_id: str) -> RunMeta:
        with self._lock:
            row = self._db.execute(f"SELECT {_RUN_COLS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"no run with id {run_id!r} in {self.home} (see `gpuscope runs`)")
        return _meta_from_row(row)

    def delete_run(self, run_id: str) -> None:
        with self._tx() as db:
            for table in ("samples", "sample_blocks", "stack_samples", "stacks", "reports", "findings", "runs"):
                db.execute(f"DELETE FROM {table} WHERE {'id' if table == 'runs' else 'run_id'} = ?", (run_id,))
        path = self.home / "runs" / run_id
        if path.exists():
            for child in path.iterdir():
                child.unlink()
            path.rmdir()

    def _mark_orphans_interrupted(self) -> None:
        """A run still ``running`` whose writer process is gone was cut off (kill -9, power loss)."""
        with self._lock:
            rows = self._db.execute("SELECT id, host, writer, heartbeat_ns FROM runs WHERE status = 'running'"
                                    ).fetchall()
        for run_id, host, writer, heartbeat_ns in rows:
            if host != self._host or writer is None:
                continue
            pid = int(writer.split(":", 1)[0])
            if _process_token(pid) == writer:
                continue
            with self._tx() as db:
                db.execute("UPDATE runs SET status = 'interrupted', writer = NULL,"
                           " ended_ns = COALESCE(ended_ns, ?) WHERE id = ? AND status = 'running'",
                           (heartbeat_ns, run_id))

    # -- samples ---------------------------------------------------------------------------

    def add_samples(self, run_id: str, rows: Iterable[SampleRow], *, heartbeat_ns: int | None = None) -> int:
        """Append samples in one transaction (a collector's flush), as one packed block. Returns how many."""
        batch = list(rows)
        with self._tx() as db:
            if batch:
                block = blocks.pack(batch)
                db.execute("INSERT INTO sample_blocks (run_id, first_ns, last_ns, n, names, data)"
                           " VALUES (?,?,?,?,?,?)", (run_id, block.first_ns, block.last_ns, block.n, block.names,
                                                     block.data))
            db.execute("UPDATE runs SET heartbeat_ns = ? WHERE id = ?", (heartbeat_ns or time.time_ns(), run_id))
        return len(batch)

    def samples(self, run_id: str, *, metrics: Sequence[str] | None = None,
                since_ns: int | None = None) -> pd.DataFrame:
        """A run's samples in long format (columns of ``schema.SAMPLE_COLUMNS``), in time order."""
        import numpy as np
        import pandas as pd  # only runs with samples pay for pandas

        since = since_ns if since_ns is not None else -(2**63)
        with self._lock:
            packed = self._db.execute("SELECT n, names, data FROM sample_blocks WHERE run_id = ? AND last_ns > ?"
                                      " ORDER BY first_ns", (run_id, since)).fetchall()
            legacy = self._db.execute("SELECT ts_ns, source, gpu, pid, metric, value FROM samples"
                                      " WHERE run_id = ? AND ts_ns > ?", (run_id, since)).fetchall()
        cols = blocks.unpack(packed)
        frame = pd.DataFrame({name: cols[name] for name in SAMPLE_COLUMNS})
        if legacy:  # stores written before samples were packed
            frame = pd.concat([frame, pd.DataFrame(legacy, columns=list(SAMPLE_COLUMNS))], ignore_index=True)
        keep = frame["ts_ns"].to_numpy() > since
        if metrics:
            keep &= frame["metric"].isin(list(metrics)).to_numpy()
        if not keep.all():
            frame = frame[keep]
        order = np.argsort(frame["ts_ns"].to_numpy(), kind="stable")
        frame = frame.iloc[order].reset_index(drop=True)
        return frame.astype({"ts_ns": "int64", "gpu": "int64", "pid": "int64", "value": "float64"})

    def sample_counts(self) -> dict[str, int]:
        with self._lock:
            counts: dict[str, int] = dict(
                self._db.execute("SELECT run_id, SUM(n) FROM sample_blocks GROUP BY run_id").fetchall())
            for run_id, n in self._db.execute("SELECT run_id, COUNT(*) FROM samples GROUP BY run_id"):
                counts[run_id] = counts.get(run_id, 0) + n
        return counts

    def add_stacks(self, run_id: str, rows: Iterable[StackRow], stacks: dict[int, tuple[str, ...]]) -> None:
        """Append py-spy stack samples; ``stacks`` holds frames of any stack ids not stored yet."""
        with self._tx() as db:
            db.executemany("INSERT OR IGNORE INTO stacks (run_id, stack_id, frames) VALUES (?,?,?)",
                           [(run_id, sid, json.dumps(list(frames))) for sid, frames in stacks.items()])
            db.executemany("INSERT INTO stack_samples (run_id, ts_ns, pid, tid, state, stack_id)"
                           " VALUES (?,?,?,?,?,?)", [(run_id, *row) for row in rows])

    def stacks(self, run_id: str) -> StackSamples | None:
        with self._lock:
            rows = self._db.execute("SELECT ts_ns, pid, tid, state, stack_id FROM stack_samples"
                                    " WHERE run_id = ? ORDER BY ts_ns", (run_id,)).fetchall()
            frames = self._db.execute("SELECT stack_id, frames FROM stacks WHERE run_id = ?", (run_id,)).fetchall()
        if not rows:
            return None
        import pandas as pd

        samples = pd.DataFrame(rows, columns=["ts_ns", "pid", "tid", "state", "stack_id"])
        return StackSamples(samples=samples, stacks={sid: tuple(json.loads(f)) for sid, f in frames})

    # -- traces and reports ----------------------------------------------------------------

    def save_traces(self, run_id: str, traces: Sequence[Any]) -> None:
        save_traces(self.run_dir(run_id), traces)

    def staging(self) -> Path:
        """A new folder for columnar traces written before their run exists (each by the process that read
        its rank); ``adopt_traces`` moves them into the run's folder. Folders older than a day, left by
        analyses that never finished, are removed here."""
        root = self.home / "staging"
        try:
            root.mkdir(exist_ok=True)
            for old in root.iterdir():
                if old.stat().st_mtime < time.time() - STAGING_MAX_AGE_S:
                    shutil.rmtree(old, ignore_errors=True)
            return Path(tempfile.mkdtemp(dir=root))
        except OSError as exc:
            raise StoreError(f"cannot write in the run store at {self.home}: {exc.strerror or exc}") from exc

    def adopt_traces(self, run_id: str, staged: Sequence[tuple[Path, int]]) -> None:
        """Move staged rank files (path, rank) into the run's folder, in place of any it had."""
        folder = self.run_dir(run_id)
        for old in folder.glob("rank*.npz"):
            old.unlink()
        for path, rank in staged:
            place_trace(path, folder, rank)

    def save_report(self, run_id: str, report: Report) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO reports (run_id, created_ns, report) VALUES (?,?,?)",
                       (run_id, time.time_ns(), to_json(report)))
            db.execute("DELETE FROM findings WHERE run_id = ?", (run_id,))
            db.executemany("INSERT INTO findings (run_id, code, severity, title, rank) VALUES (?,?,?,?,?)",
                           [(run_id, f.code, f.severity, f.title, f.rank) for f in report.findings])

    def load_report(self, run_id: str) -> Report | None:
        with self._lock:
            row = self._db.execute("SELECT report FROM reports WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else report_from_json(row[0])

    def load_run(self, run_id: str) -> Run:
        """Everything recorded for a run, ready for the analyzers."""
        meta = self.get_meta(run_id)
        samples = self.samples(run_id)
        path = self.home / "runs" / run_id
        return Run(meta=meta, traces=tuple(load_traces(path)) if path.exists() else (),
                   samples=samples if len(samples) else None, stacks=self.stacks(run_id))


_RUN_COLS = "id, name, kind, status, started_ns, ended_ns, host, command, pid, gpus, price_source, tags"


def _meta_from_row(row: Sequence[Any]) -> RunMeta:
    (run_id, name, kind, status, started_ns, ended_ns, host, command, pid, gpus, price_source, tags) = row
    return RunMeta(id=run_id, name=name, kind=kind, status=status, started_ns=started_ns, ended_ns=ended_ns,
                   host=host, command=tuple(json.loads(command or "[]")), pid=pid,
                   gpus=tuple(from_builtins(g, GpuInfo) for g in json.loads(gpus or "[]")), price_source=price_source,
                   tags=json.loads(tags or "{}"))


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
