"""What the trace views (`gpuscope ops`, `gpuscope timeline`) take: a trace path, or a saved run's traces."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from gpuscope.analyzers.trace.steps import marked_steps
from gpuscope.api.analysis import check_step_range
from gpuscope.api.errors import GpuscopeError
from gpuscope.cli.common import fail, open_store, warn, warn_loaded
from gpuscope.model.trace import RankTrace, reader_lines
from gpuscope.store import StoreError
from gpuscope.traces import load


@dataclass(frozen=True)
class Target:
    """The traces a command was pointed at."""

    label: str
    """The path as given, or the run's id."""
    traces: tuple[RankTrace, ...]
    run_id: str | None = None
    """The saved run the traces are from; None for a trace path."""
    every_rank: tuple[RankTrace, ...] = ()
    """Every rank read, ``--rank`` or not (run-level figures such as MFU cover them all)."""
    warnings: tuple[str, ...] = ()
    """What reading them left out (the lines ``gpuscope analyze`` prints and its report keeps), printed already."""


def load_target(target: str, *, rank: int | None = None, step_range: str | None = None) -> Target:
    """The ranks of a trace file or folder, else of the saved run ``target`` names; only ``rank`` when given;
    their steps marked by the ranges ``step_range`` names, when given (``--step-range``).
    A user's mistake (nothing there, no such run, no such rank, a run without traces, a step range no rank has)
    ends in one line. What the reading left out (fields, impossible events) is warned on stderr, as ``gpuscope
    analyze`` warns it."""
    try:
        check_step_range(step_range)
    except GpuscopeError as exc:
        fail(str(exc))
    path = Path(target)
    if path.exists():
        loaded = load(path)
        warn_loaded(loaded)  # the skipped files and the reader's lines, as `gpuscope analyze` says them
        traces, label, lines = loaded.traces, str(path), loaded.warnings
        if not traces:
            fail(f"{path}: none of the {len(loaded.files)} trace files could be read")
    else:
        with open_store() as store:
            try:
                run_id = store.resolve(target)
            except StoreError as exc:
                fail(f"{target}: no such trace file or folder, and {exc}")
            traces, label = store.load_traces(run_id), run_id
        lines = reader_lines(traces)
        for line in lines:  # what its reader left out, again
            warn(line)
        if not traces:
            fail(f"run {run_id} has no profiler trace (only a trace run has operators and steps)")
    if step_range is not None:
        traces = tuple(replace(t, step_range=step_range) for t in traces)
        if not any(marked_steps(t)[1] == f"range {step_range}" for t in traces):
            fail(f"{label}: no range named {step_range!r} (or beginning with it) marks a step in any rank "
                 "(--step-range takes a record_function or operator name from the trace)")
    every = tuple(sorted(traces, key=lambda t: t.rank))
    if rank is not None:
        traces = tuple(t for t in traces if t.rank == rank)
        if not traces:
            fail(f"{label} has no rank {rank}")
    return Target(label=label, traces=tuple(sorted(traces, key=lambda t: t.rank)),
                  run_id=None if path.exists() else label, every_rank=every, warnings=tuple(lines))
