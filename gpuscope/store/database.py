"""The store's SQLite file: opened without ever starting a new one over a lost one, read and written through
calls that turn SQLite's errors into one-line ``StoreError``s, and only read once the file is known damaged.

A damaged file (SQLite's "database disk image is malformed") is noted in a marker beside it
(``gpuscope.db-damaged``), so every later gpuscope process reads it read-only too, until SQLite's own check
passes on it again (restored in place) or it is replaced (moved aside: a new file).
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpuscope.store import migrations
from gpuscope.store.errors import StoreDamaged, StoreError, StoreWriteError

DB_NAME = "gpuscope.db"
MARKER_SUFFIX = "-damaged"
BUSY_TIMEOUT_S = 10.0
_HEADER = b"SQLite format 3\x00"
_CORRUPT = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB (primary codes; extended ones share the low byte)
_NOT_WRITTEN = frozenset({8, 10, 13, 14})  # SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN
_BUSY = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


class Database:
    """The connection to ``home/gpuscope.db``, shared by the threads of one process (a lock serialises it)."""

    def __init__(self, home: Path) -> None:
        self.path = home / DB_NAME
        self.damage: str | None = None
        """Why the file is known damaged (then it is only read), else None."""
        self._lock = threading.RLock()
        _refuse_lost(self.path)
        if not self.path.exists():
            _create(self.path)
        self._db = self._open()

    @property
    def marker(self) -> Path:
        return self.path.with_name(self.path.name + MARKER_SUFFIX)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def damaged_line(self, consequence: str = "runs that can still be read are shown") -> str:
        """The one line a damaged file gets: which file, why, what happens now, and what to do."""
        return (f"the run store {self.path} is damaged ({self.damage}): {consequence}, and nothing more is written"
                f" to it; restore it from a backup, or move {self.path.name} and its {self.path.name}-* files"
                " aside to start a new store")

    def read(self, sql: str, params: Sequence[Any] = (), *, what: str) -> list[Any]:
        """All rows of one query; ``what`` names what is read, for the error."""
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise self._failed(exc, what, writing=False) from None

    @contextmanager
    def write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction; refused on a damaged file. ``what`` names what is written, for the one line
        that says it was not saved."""
        with self._lock:
            if self.damage is not None:
                raise StoreDamaged(self.damaged_line(f"{what} was not saved"))
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise self._failed(exc, what, writing=True) from None
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                self._rollback()
                if isinstance(exc, sqlite3.DatabaseError):
                    raise self._failed(exc, what, writing=True) from None
                raise

    # -- opening -----------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            db = _connect(self.path, readonly=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the run store {self.path}: {exc}") from None
        try:
            db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            migrations.migrate(db)
            reason = self._marked(db)
        except sqlite3.DatabaseError as exc:
            db.close()
            if _code(exc) not in _CORRUPT:
                raise StoreError(f"the run store {self.path} is not usable: {exc}") from None
            reason = str(exc)
        if reason is None:
            return db
        db.close()
        return self._salvage(reason)

    def _marked(self, db: sqlite3.Connection) -> str | None:
        """The damage a marker recorded for this very file, unless SQLite's check now passes (restored in place)."""
        try:
            noted = json.loads(self.marker.read_text(encoding="utf-8"))
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            noted = {}
            stat = self.path.stat()
        same_file = isinstance(noted, dict) and noted.get("inode") == stat.st_ino and noted.get("device") == stat.st_dev
        if same_file and db.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
            return str(noted.get("reason") or "marked damaged")
        self.marker.unlink(missing_ok=True)
        return None

    def _salvage(self, reason: str) -> sqlite3.Connection:
        """A read-only connection that reads what it can of a damaged file."""
        self.damage = reason
        self._note(reason)
        try:
            db = _connect(self.path, readonly=True)
            # Tables whose pages are intact stay readable when others point past a truncated end.
            db.execute("PRAGMA writable_schema=ON")
            db.execute("SELECT count(*) FROM sqlite_schema").fetchall()
        except sqlite3.DatabaseError:
            raise StoreDamaged(self.damaged_line("nothing in it can be read")) from None
        return db

    def _note(self, reason: str) -> None:
        """Leave the marker for other processes (best effort: a full disk or a read-only folder may refuse it)."""
        try:
            stat = self.path.stat()
            self.marker.write_text(json.dumps({"inode": stat.st_ino, "device": stat.st_dev, "reason": reason}),
                                   encoding="utf-8")
        except OSError:
            pass

    # -- failures ----------------------------------------------------------------------------

    def _failed(self, exc: sqlite3.DatabaseError, what: str, *, writing: bool) -> StoreError:
        code = _code(exc)
        if code in _CORRUPT:
            if self.damage is None:
                self._db.close()
                self._db = self._salvage(str(exc))
            return StoreDamaged(self.damaged_line(f"{what} was not saved" if writing else
                                                  f"{what} cannot be read"))
        if writing and code in _NOT_WRITTEN:
            return StoreWriteError(f"the run store {self.path} could not be written ({exc}): {what} was not saved;"
                                   " everything saved before is kept; free some space (or raise the file size"
                                   " limit) and try again")
        if code in _BUSY:
            return StoreError(f"the run store {self.path} stayed locked by another process for over"
                              f" {BUSY_TIMEOUT_S:g} s: {what} was not {'saved' if writing else 'read'}; try again")
        return StoreError(f"the run store {self.path}: {what} was not {'saved' if writing else 'read'} ({exc})")

    def _rollback(self) -> None:
        try:
            self._db.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite already rolled back (a full disk, an I/O error)


def _connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    # mode=rw never creates a file: a new store is made by _create alone.
    uri = path.resolve().as_uri() + ("?mode=ro" if readonly else "?mode=rw")
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None)


def _refuse_lost(path: Path) -> None:
    """A store that had runs is never started afresh: an emptied, overwritten or deleted database file is an
    error, not a new store."""
    runs = path.parent / "runs"
    try:
        with path.open("rb") as f:
            head = f.read(len(_HEADER))
    except FileNotFoundError:
        kept = [p for p in runs.iterdir() if p.is_dir()] if runs.is_dir() else []
        if kept:
            raise StoreDamaged(f"the run store {path} is missing but {runs} holds the folders of {len(kept)}"
                               f" run{'s' if len(kept) > 1 else ''}:"
                               " it was moved or deleted, and gpuscope does not start a new one over them; restore"
                               f" it from a backup, or move {runs} aside to start a new store") from None
        return
    except OSError as exc:
        raise StoreError(f"cannot open the run store {path}: {exc.strerror or exc}") from None
    if not head:
        raise StoreDamaged(f"the run store {path} is empty (0 bytes): it was truncated or emptied, and gpuscope does"
                           " not start a new one over it; restore it from a backup, or move it aside to start a new"
                           " store")
    if head != _HEADER:
        raise StoreDamaged(f"the run store {path} is not an SQLite database (its first bytes were overwritten or"
                           " cut off); restore it from a backup, or move it aside to start a new store")


def _create(path: Path) -> None:
    """A new, empty store, made beside its place and linked in whole: no other process ever sees it half made,
    and of two made at once the first linked wins."""
    scratch = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.new")
    try:
        db = sqlite3.connect(scratch, isolation_level=None)
        try:
            migrations.migrate(db)
            db.execute("PRAGMA journal_mode=WAL")
        finally:
            db.close()
        try:
            os.link(scratch, path)
        except FileExistsError:
            pass  # another process made it first: theirs is used
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(scratch, path)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot create the run store {path}: {exc}") from None
    finally:
        for leftover in (scratch, *(scratch.with_name(scratch.name + s) for s in ("-wal", "-shm", "-journal"))):
            leftover.unlink(missing_ok=True)
