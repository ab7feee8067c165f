"""Find and read a trace path: one file, or a directory of rank files read in parallel processes."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from gpuscope.model.trace import RankTrace
from gpuscope.traces.cycles import latest_cycles
from gpuscope.traces.kineto import TraceError, read_trace, trace_cap
from gpuscope.traces.limits import not_regular

TRACE_SUFFIXES = (".json", ".json.gz", ".gz")
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
"""Below this much trace in all, starting worker processes costs more than it saves."""


@dataclass(frozen=True)
class Loaded:
    traces: tuple[RankTrace, ...]
    errors: tuple[TraceError, ...]
    """Rank files that could not be read; the others were."""
    files: tuple[Path, ...]
    total_bytes: int
    per_rank: tuple[Any, ...] = ()
    """What ``load``'s ``per_rank`` function returned for each trace (same order); empty when not asked,
    or when ranks had to be renumbered after reading."""
    warnings: tuple[str, ...] = ()
    """One line each: profiler cycles of one rank of which the latest was kept, and what the reader left
    out of each trace."""


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
    trace_cap()  # a bad GPUSCOPE_MAX_TRACE_GIB is told once, not once per file
    files = trace_files(Path(path))
    sizes = [f.stat().st_size for f in files]
    total = sum(sizes)
    traces: list[tuple[RankTrace, Any]] = []
    errors: list[TraceError] = []
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
    if len(files) == 1 and errors:
        raise errors[0]
    kept, cycles = latest_cycles(traces)
    ranked, extras = _unique_ranks(kept)
    rank_of = {t.source: t.rank for t in ranked}
    warnings = [f"rank {rank_of[c.kept]}: {c.files} profiler cycles in {c.files} files; analysed the latest "
                f"({Path(c.kept).name}), the others skipped" for c in sorted(cycles, key=lambda c: rank_of[c.kept])]
    warnings += [line for t in ranked for line in t.warnings] + special_files(Path(path))
    return Loaded(traces=ranked, errors=tuple(sorted(errors, key=lambda e: e.path)), files=tuple(files),
                  total_bytes=total, per_rank=extras if per_rank is not None else (), warnings=tuple(warnings))


def _context() -> BaseContext | None:
    """fork where it exists: a forked worker starts with the reader and analyses already imported (a spawned
    or forkserver one imports them again, ~0.2 s each), and shares their memory with its parent."""
    return multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def _read_one(path: Path, per_rank: Callable[[RankTrace], Any] | None) -> tuple[RankTrace, Any] | TraceError:
    try:
        trace = read_trace(path)
        return trace, per_rank(trace) if per_rank is not None else None
    except TraceError as exc:
        return exc
    except (MemoryError, RecursionError, ValueError, OverflowError) as exc:
        return TraceError(path, f"cannot be read: {type(exc).__name__}: {exc}")


def _collect(result: tuple[RankTrace, Any] | TraceError, traces: list[tuple[RankTrace, Any]],
             errors: list[TraceError]) -> None:
    if isinstance(result, TraceError):
        errors.append(result)
    else:
        traces.append(result)


def _unique_ranks(pairs: list[tuple[RankTrace, Any]]) -> tuple[tuple[RankTrace, ...], tuple[Any, ...]]:
    """Ranks by number; files that do not say which rank they are get numbered in name order (and lose
    their per-rank results, which were computed under the old number)."""
    pairs.sort(key=lambda p: (p[0].rank, p[0].source))
    if len({t.rank for t, _ in pairs}) == len(pairs):
        return tuple(t for t, _ in pairs), tuple(x for _, x in pairs)
    by_name = sorted((t for t, _ in pairs), key=lambda t: t.source)
    return tuple(replace(t, rank=i) for i, t in enumerate(by_name)), ()
