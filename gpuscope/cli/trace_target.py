"""What the trace views (`gpuscope ops`, `gpuscope timeline`) take: a trace path, or a saved run's traces."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
    """The ranks of a trace file or folder, else of the saved run ``target`` names; only ``rank`` when given.
    A user's mistake (nothing there, no such run, no such rank, a run without traces) ends in one line. What the
    reading left out (fields, impossible events) is warned on stderr, as ``gpuscope analyze`` warns it.
    ``step_range``: the NVTX range that marks an Nsight Systems profile's steps."""
    path = Path(target)
    if path.exists():
        loaded = load(path, step_range=step_range)
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
    every = tuple(sorted(traces, key=lambda t: t.rank))
    if rank is not None:
        traces = tuple(t for t in traces if t.rank == rank)
        if not traces:
            fail(f"{label} has no rank {rank}")
    return Target(label=label, traces=tuple(sorted(traces, key=lambda t: t.rank)),
                  run_id=None if path.exists() else label, every_rank=every, warnings=tuple(lines))
