"""Reading a trace path for an analysis: each rank reduced to its summary by the process that reads it (a local
worker process or a Dask worker), which also writes the rank's columnar copy for the store, so the process that
builds the report holds summaries only, however many ranks there are.
"""

from __future__ import annotations

import io
import secrets
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from gpuscope.analyzers.ranks import RankSummary, renumbered, summarize_rank
from gpuscope.model.trace import RankTrace
from gpuscope.net.deadline import Timeouts
from gpuscope.store import Store
from gpuscope.store.tracefile import save_trace
from gpuscope.traces import Loaded, SourceFile, load, recorded_span_ns


@dataclass(frozen=True)
class Reduced:
    """One rank as its worker hands it back."""

    summary: RankSummary
    staged: str | None = None
    """The file name of the rank's columnar copy in the store's staging folder, where the worker wrote it."""
    columns: bytes | None = None
    """The columnar copy itself, from a worker that cannot reach this machine's store (a Dask worker); written
    into the staging folder as it arrives, and dropped."""
    unsaved: str | None = None
    """Why the columnar copy could not be written (a full disk): the run is then not saved."""


def reduce_rank(trace: RankTrace, *, stage: str | None = None, send: bool = False,
                step_range: str | None = None) -> Reduced:
    """What a worker does with one rank: summarize it (its steps marked by ``step_range`` where given), and keep
    its columns for the store when asked (written into ``stage``, or sent back with ``send``)."""
    if step_range is not None:
        trace = replace(trace, step_range=step_range)
    summary = summarize_rank(trace, recorded_ns=recorded_span_ns(trace))
    if send:
        buffer = io.BytesIO()
        save_trace(buffer, trace)
        return Reduced(summary, columns=buffer.getvalue())
    if stage is not None:
        name = f"{secrets.token_hex(16)}.npz"
        try:
            save_trace(Path(stage) / name, trace)
        except OSError as exc:
            return Reduced(summary, unsaved=exc.strerror or str(exc))
        return Reduced(summary, staged=name)
    return Reduced(summary)


@dataclass(frozen=True)
class Reading:
    """Every rank of a trace path, reduced: the loader's account and each rank's summary (renumbered where the
    loader renumbered its file), with the staged columnar copies where the run is to be saved."""

    loaded: Loaded
    summaries: tuple[RankSummary, ...]
    staged: tuple[tuple[Path, int], ...] = ()
    """(staged file, rank) of each rank, for ``Store.save_staged_run``."""
    unsaved: tuple[str, ...] = ()
    """Why a rank's columnar copy could not be staged, for each that could not: the run cannot be saved whole."""
    notes: tuple[str, ...] = ()
    """What was cleared from the store before reading (run folders of saves that were cut off), one line each."""


@contextmanager
def read_ranks(target: Path | str, *, store: Store | None, jobs: int | None = None, executor: Executor | None = None,
               on_progress: Callable[[SourceFile], None] | None = None,
               timeouts: Timeouts | None = None, step_range: str | None = None) -> Iterator[Reading]:
    """Read and reduce every rank under ``target``. With ``store``, what analyses killed part way left in it is
    cleared first (``Reading.notes`` says what), and each rank's columnar copy is staged in it for the run to
    adopt; whatever is not adopted is removed when the block ends. ``timeouts`` bounds the reading
    (``traces.load``); ``step_range`` names the range that marks a step (``RankTrace.step_range``)."""
    with ExitStack() as stack:
        notes = store.sweep() if store is not None else ()
        stage = stack.enter_context(store.staging()) if store is not None else None
        per_rank = partial(reduce_rank, stage=str(stage) if stage is not None and executor is None else None,
                           send=stage is not None and executor is not None, step_range=step_range)
        collect = partial(_write_sent, stage) if stage is not None else None
        # the files' content hashes name a saved run's traces: nothing else needs them
        loaded = load(target, jobs=jobs, on_progress=on_progress, per_rank=per_rank, executor=executor,
                      collect=collect, timeouts=timeouts, hash_content=store is not None)
        reduced: tuple[Reduced, ...] = loaded.per_rank
        yield Reading(loaded=replace(loaded, per_rank=()),
                      summaries=tuple(renumbered(r.summary, f.rank) for f, r in zip(loaded.ranks, reduced)),
                      staged=tuple((stage / r.staged, f.rank) for f, r in zip(loaded.ranks, reduced)
                                   if stage is not None and r.staged is not None),
                      unsaved=tuple(r.unsaved for r in reduced if r.unsaved is not None), notes=notes)


def _write_sent(stage: Path, result: Any) -> Any:
    """A rank a remote worker sent back with its columns: the columns to a staged file, the rest kept."""
    if not isinstance(result, Reduced) or result.columns is None:
        return result
    name = f"{secrets.token_hex(16)}.npz"
    try:
        (stage / name).write_bytes(result.columns)
    except OSError as exc:
        return Reduced(result.summary, unsaved=exc.strerror or str(exc))
    return Reduced(result.summary, staged=name)
