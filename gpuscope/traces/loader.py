"""Find and read a trace path: one file, or a directory of rank files read in parallel processes."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from gpuscope.model.errors import AnalysisError
from gpuscope.model.trace import RankTrace
from gpuscope.traces.cycles import Pair, latest_cycles
from gpuscope.traces.kineto import TraceError, read_trace, trace_cap
from gpuscope.traces.limits import not_regular
from gpuscope.traces.ranks import number_ranks

TRACE_SUFFIXES = (".json", ".json.gz", ".gz")
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
"""Below this much trace in all, starting worker processes costs more than it saves."""
Failed = TraceError | AnalysisError
"""A file that could not be read (the user's to fix), or whose per-rank analysis failed (a bug of ours)."""


@dataclass(frozen=True)
class Loaded:
    traces: tuple[RankTrace, ...]
    errors: tuple[TraceError, ...]
    """Rank files that could not be read; the others were. (A failure of the per-rank analysis of a file that was
    read is not among them: ``load`` raises it as an AnalysisError.)"""
    files: tuple[Path, ...]
    total_bytes: int
    per_rank: tuple[Any, ...] = ()
    """What ``load``'s ``per_rank`` function returned for each trace (same order); empty when not asked."""
    warnings: tuple[str, ...] = ()
    """One line each: profiler cycles of one rank of which the latest was kept, files told apart that claimed one
    rank (or none), and what the reader left out of each trace."""


def trace_files(path: Path) -> list[Path]:
    """The trace files a path names: itself, or the trace files directly inside a directory."""
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
    if not files:
        odd = special_files(path)
        raise TraceError(path, "no trace files (*.json, *.json.gz) in this directory"
                               + (f"; {len(odd)} named like one that are not regular files: {'; '.join(odd)}"
                                  if odd else ""))
    return files


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


def load(path: Path | str, *, jobs: int | None = None, on_progress: Callable[[Path, int], None] | None = None,
         per_rank: Callable[[RankTrace], Any] | None = None) -> Loaded:
    """Read every rank under ``path``. A bad rank file is reported in ``errors``, not raised,
    unless it is the only file.

    ``per_rank`` (a module-level function, so worker processes can run it) is applied to each trace where
    it was read: per-rank work runs in parallel with the reading of other ranks.
    """
    path = Path(path)
    trace_cap()  # a bad GPUSCOPE_MAX_TRACE_GIB is told once, not once per file
    loaded = load_files(trace_files(path), where=path, jobs=jobs, on_progress=on_progress, per_rank=per_rank)
    odd = special_files(path)
    return replace(loaded, warnings=(*loaded.warnings, *odd)) if odd else loaded


def load_files(files: Sequence[Path], *, where: Path, jobs: int | None = None,
               on_progress: Callable[[Path, int], None] | None = None,
               per_rank: Callable[[RankTrace], Any] | None = None) -> Loaded:
    """``load`` of named files (``where`` names them in errors): several profiler cycles of one process are one
    rank (``cycles.latest_cycles``), and every rank gets a number of its own (``ranks.number_ranks``); raises
    TraceError when the only file cannot be read or two files cannot be told apart."""
    files = list(files)
    sizes = [f.stat().st_size for f in files]
    total = sum(sizes)
    traces: list[tuple[RankTrace, Any]] = []
    errors: list[Failed] = []
    workers = min(jobs or os.cpu_count() or 1, len(files))
    if workers > 1 and total >= PARALLEL_MIN_BYTES:
        with ProcessPoolExecutor(max_workers=workers, mp_context=_context()) as pool:
            futures = {pool.submit(_read_one, f, per_rank): (f, size) for f, size in zip(files, sizes)}
            for future in as_completed(futures):
                f, size = futures[future]
                _collect(future.result(), traces, errors)
                if on_progress:
                    on_progress(f, size)
    else:
        for f, size in zip(files, sizes):
            _collect(_read_one(f, per_rank), traces, errors)
            if on_progress:
                on_progress(f, size)
    bugs = sorted((e for e in errors if isinstance(e, AnalysisError)), key=lambda e: e.what)
    if bugs:
        raise bugs[0]
    unreadable = sorted((e for e in errors if isinstance(e, TraceError)), key=lambda e: e.path)
    if len(files) == 1 and unreadable:
        raise unreadable[0]
    pairs, warnings = _one_per_rank(traces, where)
    return Loaded(traces=tuple(t for t, _ in pairs), errors=tuple(unreadable), files=tuple(files), total_bytes=total,
                  per_rank=tuple(x for _, x in pairs) if per_rank is not None else (), warnings=warnings)


def _one_per_rank(traces: list[tuple[RankTrace, Any]], where: Path) -> tuple[tuple[Pair, ...], tuple[str, ...]]:
    """The latest profiler cycle of each writer, each with a rank number of its own, and the lines that say so
    (then what the reader left out of each trace)."""
    kept, cycles = latest_cycles(traces)
    numbered = number_ranks(kept, where)
    rank_of = {t.source: t.rank for t, _ in numbered.pairs}
    warnings = [f"rank {rank_of[c.kept]}: {c.files} profiler cycles in {c.files} files; analysed the latest "
                f"({Path(c.kept).name}), the others skipped" for c in sorted(cycles, key=lambda c: rank_of[c.kept])]
    warnings += numbered.warnings
    warnings += [line for t, _ in numbered.pairs for line in t.warnings]
    return numbered.pairs, tuple(warnings)


def _context() -> BaseContext | None:
    """fork where it exists: a forked worker starts with the reader and analyses already imported (a spawned
    or forkserver one imports them again, ~0.2 s each), and shares their memory with its parent."""
    return multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def _read_one(path: Path, per_rank: Callable[[RankTrace], Any] | None) -> tuple[RankTrace, Any] | Failed:
    try:
        trace = read_trace(path)
    except TraceError as exc:
        return exc
    except (MemoryError, RecursionError, ValueError, OverflowError) as exc:
        return TraceError(path, f"cannot be read: {type(exc).__name__}: {exc}")
    if per_rank is None:
        return trace, None
    try:
        return trace, per_rank(trace)
    except Exception as exc:  # the file was read: whatever the per-rank work raises is a bug of ours
        return AnalysisError.wrap(exc, what=str(path), stage="the per-rank analysis")


def _collect(result: tuple[RankTrace, Any] | Failed, traces: list[tuple[RankTrace, Any]],
             errors: list[Failed]) -> None:
    if isinstance(result, (TraceError, AnalysisError)):
        errors.append(result)
    else:
        traces.append(result)
