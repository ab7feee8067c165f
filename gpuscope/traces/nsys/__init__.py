"""Nsight Systems profiles (the SQLite export, or a ``.nsys-rep`` report through ``nsys export``) into the ranks of
the model, the same columnar events a Kineto trace gives, so every view reads them alike.

One export can hold several ranks (every process nsys followed, each GPU it drove): ``read_nsys`` returns them
all. What is read and what is not: docs/nsys.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

from gpuscope.model.redact import bare_url
from gpuscope.model.trace import RankTrace
from gpuscope.net.deadline import Timeouts
from gpuscope.traces.errors import TraceError
from gpuscope.traces.gunzip import TooLarge
from gpuscope.traces.limits import ENV_MAX_TRACE_GIB, size_words
from gpuscope.traces.location import is_url
from gpuscope.traces.nsys.magic import SQLITE_MAGIC
from gpuscope.traces.nsys.report_file import REPORT_SUFFIXES, export_command, exported, is_report

EXPORT_SUFFIXES = (".sqlite", ".sqlite3")
SUFFIXES = (*EXPORT_SUFFIXES, *REPORT_SUFFIXES)
"""The file names a folder's Nsight Systems profiles have."""
HASH_CHUNK_BYTES = 8 * 2**20

__all__ = ["EXPORT_SUFFIXES", "REPORT_SUFFIXES", "SUFFIXES", "is_nsys", "read_nsys"]


def is_nsys(location: str) -> bool:
    """A profile this package reads: named as an export or a report, or (a local file) an SQLite database."""
    if location.lower().endswith(SUFFIXES):
        return True
    if is_url(location):
        return False
    try:
        with open(location, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False  # the Kineto reader says what is wrong with the path


def read_nsys(location: str, *, cap: int, timeouts: Timeouts | None = None) -> tuple[RankTrace, ...]:
    """Every rank of the profile at ``location`` (a path or an fsspec URL of an export; a local ``.nsys-rep``),
    by rank. ``cap``: the most bytes the file may hold. TraceError (one line) for anything that cannot be read."""
    # The reader of exports (and sqlite3) is imported only for a profile: a folder of Kineto traces never needs it.
    from gpuscope.traces.nsys.build import build
    from gpuscope.traces.nsys.database import check_file, open_export

    label = bare_url(location) if is_url(location) else location
    if is_url(location) and is_report(location):
        raise TraceError(label, "an Nsight Systems report, which only nsys reads: download it, export it with "
                                f"`{export_command(Path(Path(location).name))}` and analyse the .sqlite file")
    with _local(location, cap=cap, timeouts=timeouts) as path:
        check_file(path, cap)
        digest = _sha256(path if is_url(location) else Path(location))  # a report: its own bytes, not its export's
        try:
            with open_export(path, label=label, timeouts=timeouts) as db:
                return build(db, source=label, digest=digest)
        except MemoryError:
            raise TraceError(label, "not enough memory to read it") from None


@contextmanager
def _local(location: str, *, cap: int, timeouts: Timeouts | None) -> Iterator[Path]:
    """A local SQLite file of the profile: the file itself, a report's export, or a URL's copy (in a temporary
    folder, removed when the block ends)."""
    if is_url(location):
        from gpuscope.traces import remote  # fsspec only where a URL is given

        with TemporaryDirectory(prefix="gpuscope-nsys-") as folder:
            try:
                data = remote.read_file(location, max_bytes=cap, timeouts=timeouts or Timeouts())
            except TooLarge:
                raise TraceError(bare_url(location), f"over the limit of {size_words(cap)} per trace file (set "
                                                     f"{ENV_MAX_TRACE_GIB} to raise it)") from None
            path = Path(folder) / "export.sqlite"
            path.write_bytes(data.tobytes())
            yield path
    elif is_report(location):
        with exported(Path(location), timeouts=timeouts) as path:
            yield path
    else:
        yield Path(location)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()
