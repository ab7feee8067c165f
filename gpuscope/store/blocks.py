"""Samples stored as blocks: one SQLite row per flush holding its samples as packed numpy records.

A day of 1 Hz sampling of eight GPUs is millions of samples; as one SQLite row each, reading them back
costs a Python tuple per sample (seconds). As one block per flush, the blocks of a run are joined and
read by a single ``numpy.frombuffer``, and the whole day loads in about a second.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuscope.model.schema import SOURCES, known_metric

RECORD = np.dtype([("ts_ns", "<i8"), ("pid", "<i8"), ("value", "<f8"), ("gpu", "<i4"), ("source", "<u2"),
                   ("metric", "<u2")])
"""One sample, 32 bytes; ``source`` and ``metric`` index the block's own name tables."""


@dataclass(frozen=True)
class Block:
    """One flush, packed: ``names`` is the JSON of its source and metric tables, ``data`` the records."""

    first_ns: int
    last_ns: int
    n: int
    names: str
    data: bytes


def pack(rows: Sequence[tuple[int, str, int, int, str, float]]) -> Block:
    """Rows (ts_ns, source, gpu, pid, metric, value) into one block."""
    sources: dict[str, int] = {}
    metrics: dict[str, int] = {}
    records = np.empty(len(rows), dtype=RECORD)
    records["ts_ns"] = [r[0] for r in rows]
    records["source"] = [sources.setdefault(r[1], len(sources)) for r in rows]
    records["gpu"] = [r[2] for r in rows]
    records["pid"] = [r[3] for r in rows]
    records["metric"] = [metrics.setdefault(r[4], len(metrics)) for r in rows]
    records["value"] = [r[5] for r in rows]
    return Block(first_ns=int(records["ts_ns"].min()), last_ns=int(records["ts_ns"].max()), n=len(rows),
                 names=json.dumps({"sources": list(sources), "metrics": list(metrics)}), data=records.tobytes())


class BlockError(ValueError):
    """A stored block that is not what ``pack`` writes (a damaged row): which one, and what is wrong."""


def unpack(blocks: Sequence[tuple[int, str, bytes]]) -> dict[str, npt.NDArray[Any]]:
    """Blocks (n, names, data) into whole columns; ``source`` and ``metric`` come back as str objects.

    Every block is checked first (its size, its name tables, its codes): a damaged one raises ``BlockError``."""
    if not blocks:
        return {name: np.empty(0, dtype=object if name in ("source", "metric") else RECORD[name])
                for name in RECORD.names or ()}
    # A collector's flushes repeat the same name tables: each distinct table is parsed once, and each row
    # finds its global name through (its block's table, its local code).
    tables: dict[str, int] = {}
    parsed: list[dict[str, list[str]]] = []
    for i, (n, names, data) in enumerate(blocks):
        if names not in tables:
            tables[names] = len(tables)
            parsed.append(_table(i, names))
        _check(i, n, data, parsed[tables[names]])
    records = np.frombuffer(b"".join(b[2] for b in blocks), dtype=RECORD)
    table_of_block = np.array([tables[b[1]] for b in blocks], dtype=np.int64)
    table_of_row = np.repeat(table_of_block, [b[0] for b in blocks])
    out = {name: records[name] for name in ("ts_ns", "pid", "value", "gpu")}
    out["source"] = _names(records["source"], table_of_row, [p["sources"] for p in parsed])
    out["metric"] = _names(records["metric"], table_of_row, [p["metrics"] for p in parsed])
    return out


def _table(index: int, names: object) -> dict[str, list[str]]:
    try:
        table = json.loads(names) if isinstance(names, str | bytes) else None
    except (ValueError, RecursionError) as exc:
        raise BlockError(f"block {index}: its name table is not JSON ({exc})") from None
    if not (isinstance(table, dict) and all(isinstance(table.get(k), list) and all(isinstance(v, str)
                                                                                   for v in table[k])
                                            for k in ("sources", "metrics"))):
        raise BlockError(f"block {index}: its name table is not lists of sources and metrics")
    unknown = [name for name in table["sources"] if name not in SOURCES] + \
        [name for name in table["metrics"] if not known_metric(name)]
    if unknown:  # the store writes only the schema's names: another name is damage
        raise BlockError(f"block {index}: its name table names {unknown[0][:40]!r}, which no collector writes")
    return table


def _check(index: int, n: object, data: object, table: dict[str, list[str]]) -> None:
    if not isinstance(n, int) or not isinstance(data, bytes) or n < 0 or len(data) != n * RECORD.itemsize:
        size = len(data) if isinstance(data, bytes) else type(data).__name__
        raise BlockError(f"block {index}: {size} bytes of data for {n!r} samples of {RECORD.itemsize} bytes")
    records = np.frombuffer(data, dtype=RECORD)
    for column, key in (("source", "sources"), ("metric", "metrics")):
        if n and int(records[column].max()) >= len(table[key]):
            raise BlockError(f"block {index}: a {column} code past its name table of {len(table[key])}")


def _names(codes: npt.NDArray[np.uint16], table_of_row: npt.NDArray[np.int64],
           tables: list[list[str]]) -> npt.NDArray[np.object_]:
    """Local codes under per-row tables into the names themselves (shared str objects, no copies)."""
    distinct: dict[str, int] = {}
    width = max(len(t) for t in tables) or 1
    lookup = np.zeros((len(tables), width), dtype=np.int64)
    for i, table in enumerate(tables):
        lookup[i, : len(table)] = [distinct.setdefault(name, len(distinct)) for name in table]
    return np.array(list(distinct), dtype=object)[lookup[table_of_row, codes]]
