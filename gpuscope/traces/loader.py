"""Find and read a trace path: one file, or a folder of rank files (local, or behind an fsspec URL), read in
parallel: in worker processes on this machine, or on any ``concurrent.futures`` executor (a Dask cluster's).

Each rank is read, and reduced by ``per_rank``, where it is read; what comes back is the rank's identity
(``RankFile``) and that reduction, so the process that started the analysis holds no rank's events.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from gpuscope.model.trace import RankFile, RankTrace
from gpuscope.traces.cycles import latest_cycles
from gpuscope.traces.errors import TraceError
from gpuscope.traces.kineto import read_trace
from gpuscope.traces.sources import SourceFile, find_sources, is_url, redact

PARALLEL_MIN_BYTES = 16 * 1024 * 1024
"""Below this much trace in all, starting worker processes costs more than it saves."""

Result = tuple[RankFile, Any] | TraceError


@dataclass(frozen=True)
class Loaded:
    ranks: tuple[RankFile, ...]
    """The ranks to analyse, in rank order, with the numbers the report gives them."""
    errors: tuple[TraceError, ...]
    """Rank files that could not be read; the others were."""
    files: tuple[str, ...]
    """Every trace file found (URLs as they may be shown: without credentials or query)."""
    total_bytes: int
    per_rank: tuple[Any, ...] = ()
    """What ``load``'s ``per_rank`` function returned for each rank (same order), computed where the rank was
    read and under the number its file gave it; a file that did not say which rank it is may have been given
    another since (``ranks[i].rank``). Empty when no ``per_rank`` was given."""
    traces: tuple[RankTrace, ...] = ()
    """The traces themselves (renumbered), only when no ``per_rank`` was given: with one, no rank's events
    are kept here."""
    warnings: tuple[str, ...] = ()
    """One line each: profiler cycles of one rank of which the latest was kept, and what the reader left
    out of each trace."""


def load(path: Path | str, *, jobs: int | None = None, on_progress: Callable[[SourceFile], None] | None = None,
         per_rank: Callable[[RankTrace], Any] | None = None, executor: Executor | None = None,
         collect: Callable[[Any], Any] | None = None) -> Loaded:
    """Read every rank under ``path`` (a local path or an fsspec URL). A bad rank file is reported in
    ``errors``, not raised, unless it is the only file.

    ``per_rank`` (a module-level function, so worker processes can run it) is applied to each trace where it
    is read, and only its result comes back; ``collect``, here, turns each result into what is kept of it as
    it arrives. ``executor`` runs the reading (each worker reads its files itself); without one, ranks are read
    in up to ``jobs`` local processes once there is enough to read.
    """
    sources = find_sources(path)
    total = sum(s.size_bytes for s in sources)
    pairs: list[tuple[RankFile, Any]] = []
    errors: list[TraceError] = []
    for result in _read_all(sources, per_rank, jobs=jobs, executor=executor, on_progress=on_progress):
        if isinstance(result, TraceError):
            errors.append(result)
        else:
            pairs.append((result[0], collect(result[1])) if collect is not None else result)
    if len(sources) == 1 and errors:
        raise errors[0]
    kept, cycles = latest_cycles(pairs)
    ranked = _unique_ranks(kept)
    rank_of = {f.source: f.rank for f, _ in ranked}
    warnings = [f"rank {rank_of[c.kept]}: {c.files} profiler cycles in {c.files} files; analysed the latest "
                f"({Path(c.kept).name}), the others skipped" for c in sorted(cycles, key=lambda c: rank_of[c.kept])]
    warnings += [line for f, _ in ranked for line in f.warnings]
    loaded = Loaded(ranks=tuple(f for f, _ in ranked), errors=tuple(sorted(errors, key=lambda e: e.path)),
                    files=tuple(redact(s.location) if is_url(s.location) else s.location for s in sources),
                    total_bytes=total, warnings=tuple(warnings))
    if per_rank is not None:
        return replace(loaded, per_rank=tuple(x for _, x in ranked))
    return replace(loaded, traces=tuple(t if t.rank == f.rank else replace(t, rank=f.rank) for f, t in ranked))


def _read_all(sources: Sequence[SourceFile], per_rank: Callable[[RankTrace], Any] | None, *, jobs: int | None,
              executor: Executor | None, on_progress: Callable[[SourceFile], None] | None) -> Iterator[Result]:
    """Each file's result, as it comes: from ``executor``, local worker processes, or this process."""
    workers = min(jobs or os.cpu_count() or 1, len(sources))
    if executor is None and (workers <= 1 or sum(s.size_bytes for s in sources) < PARALLEL_MIN_BYTES):
        for source in sources:
            yield read_one(source.location, per_rank)
            if on_progress:
                on_progress(source)
        return
    pool = executor or ProcessPoolExecutor(max_workers=workers, mp_context=_context())
    try:
        futures: dict[Future[Result], SourceFile] = {pool.submit(read_one, s.location, per_rank): s for s in sources}
        for future in as_completed(futures):
            yield future.result()
            if on_progress:
                on_progress(futures[future])
    finally:
        if executor is None:
            pool.shutdown(cancel_futures=True)


def _context() -> BaseContext | None:
    """fork where it exists: a forked worker starts with the reader and analyses already imported (a spawned
    or forkserver one imports them again, ~0.2 s each), and shares their memory with its parent."""
    return multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def read_one(location: str, per_rank: Callable[[RankTrace], Any] | None) -> Result:
    """One rank file, read and reduced where this runs: its identity and ``per_rank`` of it (the trace itself
    without ``per_rank``), or the TraceError that says why it cannot be read."""
    try:
        trace = read_trace(location)
        return RankFile.of(trace), per_rank(trace) if per_rank is not None else trace
    except TraceError as exc:
        return exc
    except (MemoryError, RecursionError, ValueError, OverflowError) as exc:
        label = redact(location) if is_url(location) else location
        return TraceError(label, f"cannot be read: {type(exc).__name__}: {exc}")


def _unique_ranks(pairs: list[tuple[RankFile, Any]]) -> list[tuple[RankFile, Any]]:
    """Ranks by number; when two files claim one number (files that do not say which rank they are), all are
    numbered in name order."""
    pairs.sort(key=lambda p: (p[0].rank, p[0].source))
    if len({f.rank for f, _ in pairs}) == len(pairs):
        return pairs
    by_name = sorted(pairs, key=lambda p: p[0].source)
    return [(replace(f, rank=i), x) for i, (f, x) in enumerate(by_name)]
