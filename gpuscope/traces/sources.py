"""Where trace files are: a local file or folder, or an fsspec URL of one (``s3://``, ``gs://``, ``az://``,
``https://``, ...).

Listing happens where the analysis starts; each file is then read by the process that analyses it (a local
worker process or a Dask worker), straight from where it is. Local paths never import fsspec.
"""

from __future__ import annotations

from pathlib import Path

from gpuscope.net.deadline import Timeouts
from gpuscope.traces import nsys
from gpuscope.traces.errors import TraceError
from gpuscope.traces.limits import not_regular
from gpuscope.traces.location import SourceFile, is_url

TRACE_SUFFIXES = (".json", ".json.gz", ".gz", *nsys.SUFFIXES)


def find_sources(target: str | Path, *, timeouts: Timeouts | None = None) -> list[SourceFile]:
    """The trace files ``target`` names: itself, or the trace files directly inside a folder (or a URL prefix,
    listed within ``timeouts``: default ``Timeouts()``, from now)."""
    if is_url(target):
        from gpuscope.traces import remote  # fsspec only where a URL is given

        return _exported_once(remote.list_files(str(target), TRACE_SUFFIXES, timeouts or Timeouts()))
    files = trace_files(Path(target))
    try:
        return [SourceFile(location=str(f), size_bytes=f.stat().st_size) for f in files]
    except OSError as exc:
        raise TraceError(target, f"cannot read: {exc.strerror or exc}") from exc


def trace_files(path: Path) -> list[Path]:
    """The trace files a local path names: itself, or the trace files directly inside a directory."""
    if not path.exists():
        raise TraceError(path, "no such file or directory")
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise TraceError(path, f"{_kind(path)}, not a trace file or a directory")
    try:
        files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
    except PermissionError as exc:
        raise TraceError(path, "permission denied") from exc
    names = {p.name for p in files}
    files = [p for p in files if not _has_export(p.name, names)]
    if not files:
        odd = special_files(path)
        raise TraceError(path, "no trace files (*.json, *.json.gz, Nsight Systems *.sqlite, *.nsys-rep) in this "
                               "directory"
                               + (f"; {len(odd)} named like one that are not regular files: {'; '.join(odd)}"
                                  if odd else ""))
    return files


def _has_export(name: str, names: set[str]) -> bool:
    """An Nsight Systems report whose SQLite export lies beside it (``nsys profile --export sqlite`` writes both):
    the export is read, the report would be the same ranks again."""
    if not name.lower().endswith(nsys.REPORT_SUFFIXES):
        return False
    stem = name.rsplit(".", 1)[0]
    return any(f"{stem}{suffix}" in names for suffix in nsys.EXPORT_SUFFIXES)


def _exported_once(files: list[SourceFile]) -> list[SourceFile]:
    names = {f.name for f in files}
    return [f for f in files if not _has_export(f.name, names)]


def special_files(path: Path) -> list[str]:
    """One warning per entry of a directory named like a trace that is not a regular file (a named pipe, a
    device, a link to nothing), which ``trace_files`` leaves out."""
    if not path.is_dir():
        return []
    try:
        odd = sorted(p for p in path.iterdir() if p.name.endswith(TRACE_SUFFIXES) and not p.is_file())
    except OSError:
        return []
    return [f"{p}: {_kind(p)}, not a trace file: skipped" for p in odd]


def _kind(path: Path) -> str:
    try:
        return not_regular(path.stat().st_mode) or "a regular file"
    except FileNotFoundError:
        return "a link to nothing"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
