"""The embedded run store: SQLite in WAL mode plus a folder per run for large artifacts.

WAL lets one writer (a collector) and any number of readers (``gpuscope runs``, the dashboard)
in other processes work at once. A run whose writer died without closing it (``kill -9``) is
marked ``interrupted`` the next time the store is opened; its samples stay. A damaged file or
record is one ``StoreError`` line (see store/database.py): the rest stays readable.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gpuscope.model.codec import report_from_json, to_json
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.redact import redact_command, redact_text
from gpuscope.model.run import Run, RunMeta, RunStatus, StackSamples
from gpuscope.model.schema import SampleRow, StackRow
from gpuscope.store import catalog, live, staging
from gpuscope.store.catalog import Listing
from gpuscope.store.database import Database
from gpuscope.store.errors import RecordDamaged, StoreDamaged, StoreError, StoreWriteError

if TYPE_CHECKING:  # traces (numpy) load with the first trace saved or read: listing runs needs neither
    import pandas as pd

    from gpuscope.model.report import Report
    from gpuscope.model.trace import RankTrace

__all__ = ["Store", "default_home", "new_run_id"]


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
        except OSError as exc:
            raise StoreError(f"cannot open the run store at {self.home}: {exc.strerror or exc}") from exc
        self._db = Database(self.home)
        self._host = socket.gethostname()
        self._mark_orphans_interrupted()

    @property
    def path(self) -> Path:
        """The database file."""
        return self._db.path

    @property
    def damage(self) -> str | None:
        """The one line saying the database file is damaged (then nothing is written to it), else None."""
        return self._db.damaged_line() if self._db.damage is not None else None

    def check_writable(self, what: str) -> None:
        """``StoreDamaged`` now, before work whose result could not be saved (a command to launch and record)."""
        if self._db.damage is not None:
            raise StoreDamaged(self._db.damaged_line(f"{what} would not be saved"))

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_dir(self, run_id: str) -> Path:
        path = self.home / "runs" / run_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    # -- catalog ---------------------------------------------------------------------------

    def create_run(self, meta: RunMeta) -> RunMeta:
        """Add a run to the catalog. A ``running`` run is owned by this process until closed."""
        meta = replace(meta, host=meta.host or self._host)
        with self._db.write(f"run {meta.id}") as db:
            self._insert_run(db, meta)
        return meta

    def run_with_content(self, content_hash: str) -> str | None:
        """The newest run read from the trace files of ``content_hash``; None when no run was."""
        rows = self._db.read("SELECT id FROM runs WHERE content_hash = ? ORDER BY started_ns DESC, id DESC LIMIT 1",
                             (content_hash,), what="the run catalog")
        return str(rows[0][0]) if rows else None

    def _insert_run(self, db: Any, meta: RunMeta, content_hash: str | None = None) -> None:
        # The one place a run's command line and name are written: secrets never reach the file (nor its WAL).
        meta = replace(meta, command=redact_command(meta.command), name=redact_text(meta.name))
        writer = _process_token(os.getpid()) if meta.status == "running" else None
        db.execute(
            "INSERT INTO runs (id, name, kind, status, started_ns, ended_ns, host, command, pid, gpus,"
            " price_source, tags, writer, heartbeat_ns, content_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (meta.id, meta.name, meta.kind, meta.status, meta.started_ns, meta.ended_ns, meta.host,
             json.dumps(list(meta.command)), meta.pid, json.dumps([asdict(g) for g in meta.gpus]),
             meta.price_source, json.dumps(meta.tags), writer, time.time_ns(), content_hash),
        )

    def update_run(self, run_id: str, *, status: RunStatus | None = None, ended_ns: int | None = None,
                   gpus: Sequence[GpuInfo] | None = None, pid: int | None = None,
                   price_source: str | None = None, tags: dict[str, str] | None = None) -> None:
        sets = _run_updates(status=status, ended_ns=ended_ns, gpus=gpus, pid=pid, price_source=price_source,
                            tags=tags)
        if not sets:
            return
        with self._db.write(f"the {'status' if status else 'catalog entry'} of run {run_id}") as db:
            db.execute(f"UPDATE runs SET {', '.join(f'{k} = ?' for k in sets)} WHERE id = ?",
                       (*sets.values(), run_id))

    def heartbeat(self, run_id: str, ts_ns: int | None = None) -> None:
        with self._db.write(f"the heartbeat of run {run_id}") as db:
            db.execute("UPDATE runs SET heartbeat_ns = ? WHERE id = ?", (ts_ns or time.time_ns(), run_id))

    def listing(self) -> Listing:
        """Every run that can be read, newest first, and one line for each kind of damage that hid any."""
        return catalog.read(self._db)

    def list_runs(self) -> list[RunMeta]:
        """All runs that can be read, newest first (``listing()`` also says what could not be)."""
        return list(self.listing().runs)

    def resolve(self, run_id: str) -> str:
        """The full id of a run named by its id or a unique prefix of it."""
        try:
            rows = self._db.read("SELECT id FROM runs WHERE id = ? OR id LIKE ? ESCAPE '\\' LIMIT 3",
                                 (run_id, _like_prefix(run_id)), what="the run catalog")
            ids = sorted({str(r[0]) for r in rows})
        except StoreDamaged:  # the id index is damaged: look through what the table still holds
            ids = sorted(m.id for m in self.list_runs() if m.id.startswith(run_id))[:3]
        if run_id in ids:
            return run_id
        if not ids:
            raise self._unknown(run_id)
        if len(ids) > 1:
            raise StoreError(f"run id prefix {run_id!r} is ambiguous: {', '.join(ids)} ...")
        return ids[0]

    def get_meta(self, run_id: str) -> RunMeta:
        try:
            rows = self._db.read(f"SELECT {catalog.RUN_COLS} FROM runs WHERE id = ?", (run_id,),
                                 what=f"the catalog entry of run {run_id}")
        except StoreDamaged:
            found = [m for m in self.list_runs() if m.id == run_id]
            if not found:
                raise self._unknown(run_id) from None
            return found[0]
        if not rows:
            raise self._unknown(run_id)
        return catalog.decode(rows[0], self._db)  # RecordDamaged when the row is

    def _unknown(self, run_id: str) -> StoreError:
        if self._db.damage is not None:
            return StoreDamaged(self._db.damaged_line(f"run {run_id!r} is not among the runs that can still be read"))
        return StoreError(f"no run with id {run_id!r} in {self.home} (see `gpuscope runs`)")

    def delete_run(self, run_id: str) -> None:
        with self._db.write(f"the deletion of run {run_id}") as db:
            for table in ("samples", "sample_blocks", "stack_samples", "stacks", "reports", "findings", "runs"):
                db.execute(f"DELETE FROM {table} WHERE {'id' if table == 'runs' else 'run_id'} = ?", (run_id,))
        shutil.rmtree(self.home / "runs" / run_id, ignore_errors=True)

    def _mark_orphans_interrupted(self) -> None:
        """A run still ``running`` whose writer process is gone was cut off (kill -9, power loss). Best effort:
        on a damaged file or a full disk the run stays ``running`` (and is marked by the next open that can)."""
        if self._db.damage is not None:
            return
        try:
            rows = self._db.read("SELECT id, host, writer, heartbeat_ns FROM runs WHERE status = 'running'",
                                 what="the running runs")
            for run_id, host, writer, heartbeat_ns in rows:
                if host != self._host or not isinstance(writer, str):
                    continue
                pid = writer.split(":", 1)[0]
                if pid.isdigit() and _process_token(int(pid)) == writer:
                    continue
                with self._db.write(f"the status of run {run_id}") as db:
                    db.execute("UPDATE runs SET status = 'interrupted', writer = NULL,"
                               " ended_ns = COALESCE(ended_ns, ?) WHERE id = ? AND status = 'running'",
                               (heartbeat_ns, run_id))
        except StoreWriteError:
            pass
        except StoreDamaged:
            pass  # the damage is in self.damage; reads go on from what can be read

    # -- samples ---------------------------------------------------------------------------

    def add_samples(self, run_id: str, rows: Iterable[SampleRow], *, heartbeat_ns: int | None = None) -> int:
        """Append samples in one transaction (a collector's flush), as one packed block. Returns how many."""
        return live.add(self._db, run_id, rows, heartbeat_ns=heartbeat_ns)

    def samples(self, run_id: str, *, metrics: Sequence[str] | None = None,
                since_ns: int | None = None) -> pd.DataFrame:
        """A run's samples in long format (columns of ``schema.SAMPLE_COLUMNS``), in time order."""
        return live.read(self._db, run_id, metrics=metrics, since_ns=since_ns)

    def sample_counts(self) -> dict[str, int]:
        """Samples per run (a run without any is absent)."""
        return live.counts(self._db)

    def sample_count(self, run_id: str) -> int:
        """One run's samples (through the index: readable when another run's pages are damaged)."""
        return live.count(self._db, run_id)

    def add_stacks(self, run_id: str, rows: Iterable[StackRow], stacks: dict[int, tuple[str, ...]]) -> None:
        """Append py-spy stack samples; ``stacks`` holds frames of any stack ids not stored yet."""
        live.add_stacks(self._db, run_id, rows, stacks)

    def stacks(self, run_id: str) -> StackSamples | None:
        return live.read_stacks(self._db, run_id)

    # -- traces and reports ----------------------------------------------------------------

    def save_traces(self, run_id: str, traces: Sequence[RankTrace]) -> None:
        if self._db.damage is not None:
            raise StoreDamaged(self._db.damaged_line(f"the traces of run {run_id} were not saved"))
        from gpuscope.store.tracefile import save_traces

        save_traces(self.run_dir(run_id), traces, run_id=run_id)

    def save_report(self, run_id: str, report: Report, *, status: RunStatus | None = None,
                    ended_ns: int | None = None) -> None:
        """Save (or replace) a run's report; with ``status`` (and ``ended_ns``) the run is closed in the same
        transaction, so a recording cut off before its report is saved stays ``running`` and is found
        ``interrupted``, never closed without one."""
        what = f"the report of run {run_id}" + (f" and its status ({status})" if status else "")
        with self._db.write(what) as db:
            self._insert_report(db, run_id, report)
            sets = _run_updates(status=status, ended_ns=ended_ns)
            if sets:
                db.execute(f"UPDATE runs SET {', '.join(f'{k} = ?' for k in sets)} WHERE id = ?",
                           (*sets.values(), run_id))

    @contextmanager
    def staging(self) -> Iterator[Path]:
        """A new folder for columnar traces written before their run exists (each by the process that read its
        rank), owned by this process until the block ends and removed then; ``save_staged_run`` moves them into
        the run's folder. Call ``sweep`` first to clear what killed analyses left."""
        if self._db.damage is not None:  # before the traces are read, not after
            raise StoreDamaged(self._db.damaged_line("the run was not saved"))
        try:
            with staging.entry(self.home / "staging") as folder:
                yield folder
        except OSError as exc:
            raise StoreWriteError(f"cannot write in the run store at {self.home}: {exc.strerror or exc}") from exc

    def sweep(self) -> tuple[str, ...]:
        """Remove what analyses killed part way left (``store.staging``): staging folders no live process owns,
        and run folders whose save was cut off before the catalog listed them; one line for each run folder."""
        if self._db.damage is not None:
            return ()

        def listed(run_id: str) -> bool:
            return bool(self._db.read("SELECT 1 FROM runs WHERE id = ?", (run_id,), what=f"run {run_id}"))

        try:
            return staging.sweep(self.home, listed)
        except StoreError:  # the catalog cannot be read: nothing is removed on a guess
            return ()

    def save_staged_run(self, meta: RunMeta, staged: Sequence[tuple[Path, int]], report: Report, *,
                        content_hash: str | None = None, over: bool = False) -> RunMeta:
        """A whole analysed trace run saved, or none of it: its traces, already written into ``staging`` as
        (file, rank), gathered into the run's folder beside it and renamed into place whole, then its catalog
        entry and report written; the folder is removed again when any part cannot be (and by a later ``sweep``
        when the process is killed before its catalog entry is written). ``content_hash`` names the files it was
        read from (``run_with_content``); with ``over``, run ``meta.id`` was read from the same files before, and
        its catalog entry and report are written over (its traces are those already saved; ``staged`` is
        left)."""
        meta = replace(meta, host=meta.host or self._host)
        if self._db.damage is not None:
            raise StoreDamaged(self._db.damaged_line(f"run {meta.id} was not saved"))
        if over:
            with self._db.write(f"run {meta.id}") as db:
                db.execute("DELETE FROM runs WHERE id = ?", (meta.id,))
                self._insert_run(db, meta, content_hash)
                self._insert_report(db, meta.id, report)
            return meta
        folder = self.home / "runs" / meta.id
        from gpuscope.store import tracefile

        try:
            with staging.entry(self.home / "staging") as build:
                built = build / meta.id
                built.mkdir()
                for path, rank in staged:
                    tracefile.place_trace(path, built, rank)
                with staging.saving_run(built, folder), self._db.write(f"run {meta.id}") as db:
                    self._insert_run(db, meta, content_hash)
                    self._insert_report(db, meta.id, report)
        except OSError as exc:
            raise StoreWriteError(f"the traces of run {meta.id} could not be written to {folder}"
                                  f" ({exc.strerror or exc}): they were not saved; free some space and try"
                                  " again") from None
        return meta

    @staticmethod
    def _insert_report(db: Any, run_id: str, report: Report) -> None:
        db.execute("INSERT OR REPLACE INTO reports (run_id, created_ns, report) VALUES (?,?,?)",
                   (run_id, time.time_ns(), to_json(report)))
        db.execute("DELETE FROM findings WHERE run_id = ?", (run_id,))
        db.executemany("INSERT INTO findings (run_id, code, severity, title, rank) VALUES (?,?,?,?,?)",
                       [(run_id, f.code, f.severity, f.title, f.rank) for f in report.findings])

    def load_report(self, run_id: str) -> Report | None:
        """The saved report, None when there is none; ``RecordDamaged`` when it cannot be decoded."""
        rows = self._db.read("SELECT report FROM reports WHERE run_id = ?", (run_id,),
                             what=f"the report of run {run_id}")
        if not rows:
            return None
        try:
            return report_from_json(rows[0][0])
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError, RecursionError) as exc:
            raise RecordDamaged(f"the saved report of run {run_id} in {self.path} cannot be read ({exc});"
                                f" `gpuscope show {run_id} --reanalyze` analyses the run again") from None

    def report_versions(self) -> dict[str, int]:
        """When each saved report was written (ns), by run: what a cache of decoded reports is keyed by."""
        rows = self._db.read("SELECT run_id, created_ns FROM reports", what="the saved reports")
        return {str(run_id): int(created) for run_id, created in rows if isinstance(created, int)}

    def load_run(self, run_id: str) -> Run:
        """Everything recorded for a run, ready for the analyzers."""
        meta = self.get_meta(run_id)
        samples = self.samples(run_id)
        return Run(meta=meta, traces=self.load_traces(run_id), samples=samples if len(samples) else None,
                   stacks=self.stacks(run_id))

    def load_traces(self, run_id: str) -> tuple[RankTrace, ...]:
        """The run's profiler traces alone (no samples or stacks: reading them needs nothing but numpy)."""
        from gpuscope.store.tracefile import load_traces

        path = self.home / "runs" / run_id
        return tuple(load_traces(path, run_id=run_id)) if path.exists() else ()


def _run_updates(*, status: RunStatus | None = None, ended_ns: int | None = None,
                 gpus: Sequence[GpuInfo] | None = None, pid: int | None = None, price_source: str | None = None,
                 tags: dict[str, str] | None = None) -> dict[str, Any]:
    """The catalog columns an update sets; a run no longer ``running`` has no writer."""
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
    return sets


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
