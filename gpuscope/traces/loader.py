"""Find and read a trace path: one file, or a folder of rank files (local, or behind an fsspec URL), read in
parallel: in worker processes on this machine, or on any ``concurrent.futures`` executor (a Dask cluster's).

Each rank is read, and reduced by ``per_rank``, where it is read; what comes back is the rank's identity
(``RankFile``) and that reduction, so the process that started the analysis holds no rank's events.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuscope.model.errors import AnalysisError
from gpuscope.model.redact import bare_url
from gpuscope.model.trace import RankFile, RankTrace, dropped_line
from gpuscope.net.deadline import Timeouts
from gpuscope.traces import nsys
from gpuscope.traces.cycles import Pair, latest_cycles
from gpuscope.traces.errors import RemoteTimeout, TraceError
from gpuscope.traces.kineto import read_trace, trace_cap
from gpuscope.traces.location import SourceFile, is_url
from gpuscope.traces.ranks import number_ranks
from gpuscope.traces.sources import find_sources, special_files

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

PARALLEL_MIN_BYTES = 16 * 1024 * 1024
"""Below this much trace JSON in all, starting worker processes costs more than it saves."""
GZIP_TRAILER_BYTES = 18
"""The smallest gzip file: a 10-byte header and an 8-byte trailer."""
LATE_GRACE_S = 0.5
"""How long past the deadline workers are waited for, so that one that ran out of time itself says where."""
Failed = TraceError | AnalysisError
"""A file that could not be read (the user's to fix), or whose per-rank analysis failed (a bug of ours)."""
Result = Pair | Failed


@dataclass(frozen=True)
class Loaded:
    ranks: tuple[RankFile, ...]
    """The ranks to analyse, in rank order, with the numbers the report gives them."""
    errors: tuple[TraceError, ...]
    """Rank files that could not be read; the others were. (A failure of the per-rank analysis of a file that was
    read is not among them: ``load`` raises it as an AnalysisError.)"""
    files: tuple[str, ...]
    """Every trace file found (URLs as they may be shown: without credentials or query)."""
    total_bytes: int
    per_rank: tuple[Any, ...] = ()
    """What ``load``'s ``per_rank`` function returned for each rank (same order), computed where the rank was
    read and under the number its file claimed; a rank told apart from another since has a new number
    (``ranks[i].rank``), set in a result that is a dataclass with a ``rank`` field. Empty without ``per_rank``."""
    traces: tuple[RankTrace, ...] = ()
    """The traces themselves (renumbered), only when no ``per_rank`` was given: with one, no rank's events
    are kept here."""
    warnings: tuple[str, ...] = ()
    """One line each: profiler cycles of one rank of which the latest was kept, files told apart that claimed one
    rank (or none), what the reader left out of each trace, and the impossible GPU events it dropped."""


def load(path: Path | str, *, jobs: int | None = None, on_progress: Callable[[SourceFile], None] | None = None,
         per_rank: Callable[[RankTrace], Any] | None = None, executor: Executor | None = None,
         collect: Callable[[Any], Any] | None = None, timeouts: Timeouts | None = None,
         hash_content: bool = True) -> Loaded:
    """Read every rank under ``path`` (a local path or an fsspec URL). A bad rank file is reported in
    ``errors``, not raised, unless it is the only file; a local entry named like a trace that is not a regular
    file is named in ``warnings`` and skipped.

    ``per_rank`` (a module-level function, so worker processes can run it) is applied to each trace where it
    is read, and only its result comes back; ``collect``, here, turns each result into what is kept of it as
    it arrives. ``executor`` runs the reading (each worker reads its files itself); without one, ranks are read
    in up to ``jobs`` local processes once there is enough to read.

    ``timeouts`` bounds the whole load (a URL gets ``Timeouts()`` from now when none is given): listing, each
    remote read, and the wait for workers, which are stopped at the deadline (``RemoteTimeout``). Without it, a
    local path is read for as long as that takes. Without ``hash_content`` no file's text is hashed (each trace's
    ``content_sha256`` is left empty): the hashes name a saved run's traces, and nothing else needs them. (One
    Nsight Systems profile may hold several ranks.)
    """
    trace_cap()  # a bad GPUSCOPE_MAX_TRACE_GIB is told once, not once per file
    if timeouts is None and is_url(path):
        timeouts = Timeouts()
    loaded = load_files(find_sources(path, timeouts=timeouts), where=path, jobs=jobs, on_progress=on_progress,
                        per_rank=per_rank, executor=executor, collect=collect, timeouts=timeouts,
                        hash_content=hash_content)
    odd = [] if is_url(path) else special_files(Path(path))
    return replace(loaded, warnings=(*loaded.warnings, *odd)) if odd else loaded


def load_files(files: Sequence[SourceFile | Path], *, where: Path | str, jobs: int | None = None,
               on_progress: Callable[[SourceFile], None] | None = None,
               per_rank: Callable[[RankTrace], Any] | None = None, executor: Executor | None = None,
               collect: Callable[[Any], Any] | None = None, timeouts: Timeouts | None = None,
               hash_content: bool = True) -> Loaded:
    """``load`` of named files (``where`` names them in errors): several profiler cycles of one process are one
    rank (``cycles.latest_cycles``), and every rank gets a number of its own (``ranks.number_ranks``); raises
    TraceError when the only file cannot be read or two files cannot be told apart (RemoteTimeout, at once,
    when ``timeouts``' deadline passes), and AnalysisError when the per-rank work failed on a file that was read."""
    sources = [f if isinstance(f, SourceFile) else SourceFile(str(f), f.stat().st_size) for f in files]
    pairs: list[Pair] = []
    errors: list[Failed] = []
    for result in _read_all(sources, per_rank, jobs=jobs, executor=executor, on_progress=on_progress,
                            timeouts=timeouts, hash_content=hash_content):
        if isinstance(result, RemoteTimeout):
            raise result
        if isinstance(result, (TraceError, AnalysisError)):
            errors.append(result)
        else:
            pairs.append((result[0], collect(result[1])) if collect is not None else result)
    bugs = sorted((e for e in errors if isinstance(e, AnalysisError)), key=lambda e: e.what)
    if bugs:
        raise bugs[0]
    unreadable = sorted((e for e in errors if isinstance(e, TraceError)), key=lambda e: e.path)
    if len(sources) == 1 and unreadable:
        raise unreadable[0]
    numbered, warnings = _one_per_rank(pairs, bare_url(str(where)) if is_url(where) else where)
    loaded = Loaded(ranks=tuple(f for f, _ in numbered), errors=tuple(unreadable),
                    files=tuple(bare_url(s.location) if is_url(s.location) else s.location for s in sources),
                    total_bytes=sum(s.size_bytes for s in sources), warnings=warnings)
    results = tuple(x for _, x in numbered)
    return replace(loaded, per_rank=results) if per_rank is not None else replace(loaded, traces=results)


def _one_per_rank(pairs: list[Pair], where: Path | str) -> tuple[tuple[Pair, ...], tuple[str, ...]]:
    """The latest profiler cycle of each writer, each with a rank number of its own, and the lines that say so
    (then what the reader left out of each trace)."""
    kept, cycles = latest_cycles(pairs)
    numbered = number_ranks(kept, where)
    rank_of = {f.source: f.rank for f, _ in numbered.pairs}
    warnings = [f"rank {rank_of[c.kept]}: {c.files} profiler cycles in {c.files} files; analysed the latest "
                f"({Path(c.kept).name}), the others skipped" for c in sorted(cycles, key=lambda c: rank_of[c.kept])]
    warnings += numbered.warnings
    warnings += [line for f, _ in numbered.pairs for line in f.warnings]
    warnings += [dropped_line(f.rank, f.source, f.dropped) for f, _ in numbered.pairs if f.dropped]
    return numbered.pairs, tuple(warnings)


def _read_all(sources: Sequence[SourceFile], per_rank: Callable[[RankTrace], Any] | None, *, jobs: int | None,
              executor: Executor | None, on_progress: Callable[[SourceFile], None] | None,
              timeouts: Timeouts | None, hash_content: bool = True) -> Iterator[Result]:
    """Each file's result, as it comes: from ``executor``, local worker processes, or this process."""
    cores = jobs or os.cpu_count() or 1
    workers = min(cores, len(sources))
    if executor is None and (workers <= 1 or sum(_json_bytes(s) for s in sources) < PARALLEL_MIN_BYTES
                             or not _may_start_workers()):
        for source in sources:  # here, one at a time: each large one read by every core (``split``)
            if timeouts is not None and (timeouts.deadline.expired or timeouts.deadline.cancelled):
                raise _late(timeouts, [source])
            yield from read_one(source.location, per_rank, timeouts, hash_content, jobs=cores)
            if on_progress:
                on_progress(source)
        return
    own = worker_pool(workers) if executor is None else None
    pool = executor if own is None else own
    assert pool is not None
    # Fewer files than cores: each worker reads its large file with its share of the cores (``split``).
    share = max(1, cores // len(sources)) if own is not None else 1
    futures: dict[Future[list[Result]], SourceFile] = {}
    finished = False
    try:
        futures = {pool.submit(read_one, s.location, per_rank, timeouts, hash_content, share): s for s in sources}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=_wait_s(timeouts), return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: futures[f].location):
                yield from future.result()
                if on_progress:
                    on_progress(futures[future])
            if pending and timeouts is not None and (timeouts.deadline.left_s() < -LATE_GRACE_S
                                                     or timeouts.deadline.cancelled):
                raise _late(timeouts, [futures[f] for f in pending])
        finished = True
    finally:
        if own is not None:
            if finished:
                own.shutdown(cancel_futures=True)
            else:
                _stop(own)  # a worker may be blocked in a read: it is not waited for
        elif not finished:
            for future in futures:
                future.cancel()


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """``workers.worker_pool``, imported only where workers start: a single rank file, or a few small ones, are
    read without multiprocessing (and ctypes) imported."""
    from gpuscope.traces import workers as local

    return local.worker_pool(workers)


def _may_start_workers() -> bool:
    """``workers.may_start_workers``, imported only where workers would start."""
    from gpuscope.traces import workers as local

    return local.may_start_workers()


def _wait_s(timeouts: Timeouts | None) -> float | None:
    """How long to wait for the next result before looking at the deadline again."""
    return None if timeouts is None else max(0.01, min(0.25, timeouts.deadline.left_s() + LATE_GRACE_S))


def _late(timeouts: Timeouts, left: Sequence[SourceFile]) -> RemoteTimeout:
    first = sorted(left, key=lambda s: s.location)[0].location
    others = f"; {len(left) - 1} more trace files were not read either" if len(left) > 1 else ""
    why = "stopped" if timeouts.deadline.cancelled else f"not read within {timeouts.deadline.seconds:g} s"
    return RemoteTimeout(bare_url(first) if is_url(first) else first,
                         f"{why}, the limit of the whole command (--timeout){others}")


def _stop(pool: ProcessPoolExecutor) -> None:
    """End a pool now: its worker processes killed (a worker blocked in a read would hold ``shutdown`` until its
    read ends), queued work cancelled."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # no public handle before Python 3.14
    for process in processes:
        if process.is_alive():
            process.kill()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join(timeout=5)


def read_traces(location: str, *, timeouts: Timeouts | None = None, hash_content: bool = True,
                jobs: int = 1) -> tuple[RankTrace, ...]:
    """Every rank one file holds: a Kineto trace's one (a large one's events decoded in up to ``jobs``
    processes), or each process and GPU of an Nsight Systems profile (whose content hash is always taken: it is
    read from the file, not beside a decode)."""
    if nsys.is_nsys(location):
        return nsys.read_nsys(location, cap=trace_cap(), timeouts=timeouts)
    return (read_trace(location, timeouts=timeouts, hash_content=hash_content, jobs=jobs),)


def read_one(location: str, per_rank: Callable[[RankTrace], Any] | None, timeouts: Timeouts | None = None,
             hash_content: bool = True, jobs: int = 1) -> list[Result]:
    """One file's ranks, read and reduced where this runs: each rank's identity and ``per_rank`` of it (the trace
    itself without ``per_rank``), or the TraceError that says why the file cannot be read (the AnalysisError when
    the per-rank work failed on a rank). A URL is read within ``timeouts``; a large Kineto file in up to ``jobs``
    processes."""
    label = bare_url(location) if is_url(location) else location
    try:
        traces = read_traces(location, timeouts=timeouts, hash_content=hash_content, jobs=jobs)
    except TraceError as exc:
        return [exc]
    except (MemoryError, RecursionError, ValueError, OverflowError) as exc:
        return [TraceError(label, f"cannot be read: {type(exc).__name__}: {exc}")]
    if per_rank is None:
        return [(RankFile.of(trace), trace) for trace in traces]
    out: list[Result] = []
    for trace in traces:
        try:
            out.append((RankFile.of(trace), per_rank(trace)))
        except Exception as exc:  # the file was read: whatever the per-rank work raises is a bug of ours
            return [AnalysisError.wrap(exc, what=label, stage="the per-rank analysis")]
    return out


def _json_bytes(source: SourceFile) -> int:
    """How much JSON a file holds, for choosing between this process and workers: a local gzip file's trailer
    says (its last member's size, mod 4 GiB; profiler traces shrink 10 to 30 times), anything else its size."""
    if is_url(source.location) or not source.location.endswith(".gz") or source.size_bytes < GZIP_TRAILER_BYTES:
        return source.size_bytes
    try:
        with open(source.location, "rb") as f:
            f.seek(-4, os.SEEK_END)
            return max(source.size_bytes, int.from_bytes(f.read(4), "little"))
    except OSError:
        return source.size_bytes  # the reader says what is wrong with the file

