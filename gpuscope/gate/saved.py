"""A report saved with ``gpuscope analyze --json`` (plain or gzipped), read back as a gate's baseline or candidate.

The file comes from an old CI run, or from anyone: it is read at most ``MAX_REPORT_BYTES`` (after gunzip), decoded
into the typed report, and anything wrong with it is one line naming the file.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from pathlib import Path

import msgspec

from gpuscope.analyzers import consistency
from gpuscope.model.codec import report_from_json
from gpuscope.model.diagnosis import Verdict
from gpuscope.model.report import SCHEMA, Report, RunSummary

MAX_REPORT_BYTES = 256 * 2**20
"""A report is a few kB per rank and step; 256 MiB is far past any real one and bounds what a bad file costs."""
_REPORT_HEAD = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"gpuscope\.report/')


class _Head(msgspec.Struct):
    schema: str = ""


class ReportFileError(Exception):
    """A saved report that cannot be used; one line naming the file."""


def is_report(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts as a saved report does (not a trace)."""
    try:
        with _open(path) as f:
            head = f.read(256)
    except (OSError, EOFError, zlib.error):
        return False
    return bool(_REPORT_HEAD.match(head))


def read_report(path: Path, *, max_bytes: int = MAX_REPORT_BYTES) -> Report:
    """The report saved in ``path``; ``ReportFileError`` when it cannot be read or is not a whole report."""
    try:
        with _open(path) as f:
            data = f.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ReportFileError(f"{path}: not a readable gpuscope report: {_words(exc)}") from None
    if len(data) > max_bytes:
        raise ReportFileError(f"{path}: more than {max_bytes // 2**20} MiB, too large for a gpuscope report")
    schema = SCHEMA  # until the file says otherwise: a file that is not JSON is not a readable report
    try:
        schema = msgspec.json.decode(data, type=_Head).schema
        return consistency.enforce(report_from_json(data))
    except msgspec.DecodeError as exc:  # ValidationError too: a field of the wrong type or a value out of range
        if schema == SCHEMA:
            raise ReportFileError(f"{path}: not a readable gpuscope report: {exc}") from None
    except RecursionError:
        raise ReportFileError(f"{path}: not a readable gpuscope report: nested too deeply") from None
    # A schema this version does not read: the gate fails on it by name (``gate.comparable``), not on its fields.
    return Report(schema=schema, run=RunSummary(id=str(path), kind="report", name=path.name), ranks=(),
                  verdict=Verdict(primary=None, resource="unknown"))


def _open(path: Path) -> io.BufferedIOBase:
    if not path.is_file():  # a named pipe would block the open, a device never end
        raise OSError(f"not a regular file: {path}")
    return gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")


def _words(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__
