"""A rank's columnar trace on disk: one uncompressed ``.npz`` per rank, loaded without parsing JSON again."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import IO

import numpy as np

from gpuscope.model.codec import from_builtins
from gpuscope.model.run import GpuInfo
from gpuscope.model.trace import CollectiveOps, Events, MemoryEvents, RankTrace

_EVENT_FIELDS = tuple(f.name for f in fields(Events) if f.init)
_MEMORY_FIELDS = tuple(f.name for f in fields(MemoryEvents))
_COMM_ARRAYS = tuple(f.name for f in fields(CollectiveOps) if f.name not in ("op", "dtype"))


def save_traces(folder: Path, traces: Sequence[RankTrace]) -> None:
    for old in folder.glob("rank*.npz"):
        old.unlink()
    for trace in traces:
        save_trace(folder / file_name(trace.rank), trace)


def file_name(rank: int) -> str:
    return f"rank{rank:05d}.npz"


def save_trace(target: Path | IO[bytes], trace: RankTrace) -> None:
    """One rank's columns and header as one uncompressed ``.npz`` (a file, or bytes to send elsewhere)."""
    arrays = {f"e_{name}": getattr(trace.events, name) for name in _EVENT_FIELDS}
    arrays |= {f"m_{name}": getattr(trace.memory, name) for name in _MEMORY_FIELDS}
    arrays |= {f"c_{name}": getattr(trace.collectives, name) for name in _COMM_ARRAYS}
    header = {"rank": trace.rank, "source": trace.source, "names": list(trace.names),
              "gpus": [asdict(g) for g in trace.gpus], "world_size": trace.world_size,
              "backend": trace.backend, "attrs": trace.attrs, "pid": trace.pid,
              "rank_given": trace.rank_given, "warnings": list(trace.warnings),
              "collective_ops": list(trace.collectives.op), "collective_dtypes": list(trace.collectives.dtype)}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(target, **arrays)


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


def load_traces(folder: Path) -> list[RankTrace]:
    return [load_trace(path) for path in sorted(folder.glob("rank*.npz"))]


def load_trace(path: Path) -> RankTrace:
    with np.load(path) as data:
        header = json.loads(data["header"].tobytes())
        # Runs saved before a column existed load with its default (precision: UNKNOWN).
        events = Events(**{name: data[f"e_{name}"] for name in _EVENT_FIELDS if f"e_{name}" in data})
        memory = MemoryEvents(**{name: data[f"m_{name}"] for name in _MEMORY_FIELDS})
        # Runs saved before collectives were read load without them.
        comms = CollectiveOps(**{name: data[f"c_{name}"] for name in _COMM_ARRAYS},
                              op=tuple(header["collective_ops"]), dtype=tuple(header["collective_dtypes"])) \
            if "collective_ops" in header else CollectiveOps.empty()
    return RankTrace(rank=header["rank"], source=header["source"], events=events, memory=memory,
                     names=tuple(header["names"]), gpus=tuple(from_builtins(g, GpuInfo) for g in header["gpus"]),
                     world_size=header["world_size"], backend=header["backend"], attrs=header["attrs"],
                     pid=header.get("pid"), rank_given=header.get("rank_given", False),
                     warnings=tuple(header.get("warnings", ())), collectives=comms)
