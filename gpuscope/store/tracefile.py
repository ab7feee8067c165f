"""A rank's columnar trace on disk: one uncompressed ``.npz`` per rank, loaded without parsing JSON again.

Each file is written beside its place and renamed in whole, so a cut-off write never leaves half a file; one
read back is checked (array shapes and types, and every value within what the reader makes: ``trace_checks``),
so a damaged file is one ``RecordDamaged`` line rather than a traceback or a nonsense figure in the analyzers.
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import IO, Any

import msgspec
import numpy as np

from gpuscope.model.gpu import GpuInfo
from gpuscope.model.trace import CollectiveOps, DroppedEvent, Events, MemoryEvents, OpShape, RankTrace
from gpuscope.store.errors import RecordDamaged, StoreWriteError
from gpuscope.store.trace_checks import (
    COLLECTIVE_DTYPES,
    EVENT_DTYPES,
    MEMORY_DTYPES,
    check_collectives,
    check_events,
    check_memory,
    typed,
)

_EVENT_FIELDS = tuple(f.name for f in fields(Events) if f.init)
_MEMORY_FIELDS = tuple(f.name for f in fields(MemoryEvents))
_COMM_ARRAYS = tuple(f.name for f in fields(CollectiveOps) if f.name not in ("op", "dtype", "group"))


class _Header(msgspec.Struct):
    """A saved rank's header, as ``save_trace`` writes it (fields added later have defaults)."""

    rank: int
    source: str
    names: list[str]
    gpus: list[GpuInfo]
    world_size: int | None = None
    backend: str | None = None
    attrs: dict[str, str] = {}
    pid: int | None = None
    rank_given: bool = False
    warnings: list[str] = []
    base_time_ns: Any = None
    collective_ops: list[str] | None = None
    collective_dtypes: list[str] | None = None
    collective_groups: list[str] = []
    host_name: Any = None
    dropped: list[DroppedEvent] = []
    shapes: list[tuple[str, list[str], str]] = []
    """Interned input shapes (dims, types, concrete); runs saved before shapes were kept have none."""
    step_range: str | None = None
    """The user's step range name (``--step-range``) the rank was read with; None for ProfilerStep or engine steps."""


def save_traces(folder: Path, traces: Sequence[RankTrace], *, run_id: str = "") -> None:
    """Write each rank's file (replacing what the folder held); ``StoreWriteError`` when the disk refuses."""
    try:
        for old in folder.glob("rank*.npz"):
            old.unlink()
        for trace in traces:
            save_trace(folder / file_name(trace.rank), trace)
    except OSError as exc:
        raise StoreWriteError(f"the traces of run {run_id or folder.name} could not be written to {folder}"
                              f" ({exc.strerror or exc}): they were not saved; free some space and try again"
                              ) from None


def file_name(rank: int) -> str:
    return f"rank{rank:05d}.npz"


def save_trace(target: Path | IO[bytes], trace: RankTrace) -> None:
    """One rank's columns and header as one uncompressed ``.npz``: a file (written whole or not at all), or
    bytes to send elsewhere."""
    arrays = {f"e_{name}": getattr(trace.events, name) for name in _EVENT_FIELDS}
    arrays |= {f"m_{name}": getattr(trace.memory, name) for name in _MEMORY_FIELDS}
    arrays |= {f"c_{name}": getattr(trace.collectives, name) for name in _COMM_ARRAYS}
    header = {"rank": trace.rank, "source": trace.source, "names": list(trace.names),
              "gpus": [asdict(g) for g in trace.gpus], "world_size": trace.world_size,
              "backend": trace.backend, "attrs": trace.attrs, "pid": trace.pid,
              "rank_given": trace.rank_given, "warnings": list(trace.warnings), "base_time_ns": trace.base_time_ns,
              "collective_ops": list(trace.collectives.op), "collective_dtypes": list(trace.collectives.dtype),
              "collective_groups": list(trace.collectives.group), "host_name": trace.host_name,
              "dropped": [asdict(d) for d in trace.dropped], "step_range": trace.step_range,
              "shapes": [[s.dims, list(s.types), s.concrete] for s in trace.shapes]}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    if not isinstance(target, Path):
        np.savez(target, **arrays)
        return
    partial = target.with_name(target.name + ".partial")
    try:
        with partial.open("wb") as f:
            np.savez(f, **arrays)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def place_trace(staged: Path, folder: Path, rank: int) -> None:
    """Move a rank file written before its run existed into the run's folder, as ``rank`` (its header is
    rewritten when the rank was renumbered after the file was written)."""
    target = folder / file_name(rank)
    trace = load_trace(staged)
    if trace.rank != rank:
        save_trace(target, replace(trace, rank=rank))
        staged.unlink()
    else:
        os.replace(staged, target)


def load_traces(folder: Path, *, run_id: str = "") -> list[RankTrace]:
    """Every rank saved in ``folder``; ``RecordDamaged`` naming the first file that cannot be read."""
    traces = []
    for path in sorted(folder.glob("rank*.npz")):
        try:
            traces.append(load_trace(path))
        except (OSError, EOFError, ValueError, KeyError, TypeError, IndexError, RecursionError, zipfile.BadZipFile,
                zlib.error, msgspec.ValidationError,
                RuntimeError) as exc:  # zipfile: an unknown compression method or an "encrypted" flag
            run = run_id or folder.name
            raise RecordDamaged(f"the saved trace {path} cannot be read ({type(exc).__name__}: {exc});"
                                f" `gpuscope show {run}` without --reanalyze still shows the report saved with it,"
                                " and `gpuscope analyze` reads the original trace again") from None
    return traces


def _check_sizes(path: Path) -> None:
    """Each array's header against the bytes stored for it: a damaged header that claims a huge shape would have
    ``np.load`` allocate that much before it finds the data missing."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            with archive.open(info) as member:
                major, _ = np.lib.format.read_magic(member)
                read_header = np.lib.format.read_array_header_1_0 if major == 1 else \
                    np.lib.format.read_array_header_2_0
                shape, _, dtype = read_header(member)
                needed = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if needed > info.file_size - member.tell():
                    raise ValueError(f"{info.filename} claims {needed} bytes and holds"
                                     f" {info.file_size - member.tell()}")


def load_trace(path: Path) -> RankTrace:
    """One saved rank file, checked: ``ValueError`` (or a reader's own error) when it is damaged."""
    _check_sizes(path)
    with np.load(path, allow_pickle=False) as data:
        header = msgspec.json.decode(data["header"].tobytes(), type=_Header)
        names = tuple(header.names)
        # Runs saved before a column existed load with its default (precision: UNKNOWN).
        columns = typed(_columns(data, "e_", [n for n in _EVENT_FIELDS if f"e_{n}" in data]), EVENT_DTYPES, "e")
        check_events(columns, len(names), len(header.shapes))
        events = Events(**columns)
        # Runs saved before the address, reserved and thread columns load with them unknown (-1).
        columns = typed(_columns(data, "m_", [n for n in _MEMORY_FIELDS if f"m_{n}" in data]), MEMORY_DTYPES, "m")
        check_memory(columns)
        memory = MemoryEvents(**columns)
        # Runs saved before collectives were read load without them.
        comms = CollectiveOps.empty()
        if header.collective_ops is not None:
            # Runs saved before a collective column existed (the sequence number) load with its default.
            columns = typed(_columns(data, "c_", [n for n in _COMM_ARRAYS if f"c_{n}" in data]),
                            COLLECTIVE_DTYPES, "c")
            check_collectives(columns)
            comms = CollectiveOps(**columns, op=tuple(header.collective_ops),
                                  dtype=tuple(header.collective_dtypes or ()), group=tuple(header.collective_groups))
    if not len(comms.op) == len(comms.dtype) == len(comms.ts_ns):
        raise ValueError("its collectives' columns are not one length")
    shapes = tuple(OpShape(dims=d, types=tuple(ts), concrete=c) for d, ts, c in header.shapes)
    return RankTrace(rank=header.rank, source=header.source, events=events, memory=memory, names=names,
                     gpus=tuple(header.gpus), world_size=header.world_size, backend=header.backend,
                     attrs=header.attrs, pid=header.pid, rank_given=header.rank_given,
                     warnings=tuple(header.warnings), collectives=comms,
                     base_time_ns=_whole_or_none(header.base_time_ns), shapes=shapes,
                     host_name=header.host_name if isinstance(header.host_name, str) else None,
                     dropped=tuple(header.dropped), step_range=header.step_range or None)


def _whole_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _columns(data: Any, prefix: str, names: Sequence[str]) -> dict[str, Any]:
    """A group's arrays, as the model declares them: one dimension each, all of one length."""
    columns = {name: data[f"{prefix}{name}"] for name in names}
    lengths = {a.shape for name, a in columns.items() if a.size or name != "precision"}  # empty: UNKNOWN
    if any(len(shape) != 1 for shape in lengths) or len({s[0] for s in lengths}) > 1:
        raise ValueError(f"its {prefix.rstrip('_')} columns are not one length: {sorted(lengths)}")
    if any(a.dtype.kind not in "iuf" for a in columns.values()):
        raise ValueError(f"its {prefix.rstrip('_')} columns hold something other than numbers")
    return columns
