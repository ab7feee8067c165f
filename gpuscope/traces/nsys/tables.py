"""The export's GPU work and CUDA API calls as numpy columns, read with SQL, a table at a time.

Each query asks only for what the analysis reads, and numpy takes the rows straight from the cursor
(``np.fromiter`` into a structured array): no Python object per row outlives its row. A column a release does not
write is read as -1 (unknown), and so is a NULL. Names stay ``StringIds`` ids here; ``names`` turns the ids the
rows use into text, once each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.traces.nsys.database import Export

I64 = npt.NDArray[np.int64]
PID_SHIFT = 24
ID_MASK = 0xFFFFFF
"""nsys serialises a process as ``globalPid`` and a thread as ``globalTid``: pid = (id >> 24) & 0xFFFFFF,
tid = id & 0xFFFFFF."""
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"


@dataclass(frozen=True)
class Activity:
    """Rows of one GPU activity table (kernels, copies, memsets or synchronisations), in the table's order."""

    start_ns: I64
    end_ns: I64
    pid: I64
    device: I64
    """The CUDA device as the process numbered it (CUPTI's ``deviceId``)."""
    context: I64
    stream: I64
    correlation: I64
    name: I64
    """Kernels: the ``StringIds`` id of the demangled name (the short name where there is none); copies: the copy
    kind; memsets: the memory kind; synchronisations: the sync type."""
    src_kind: I64
    """Copies: the source's memory kind (-1 for the other tables)."""
    dst_kind: I64
    bytes: I64
    """Copies and memsets: bytes moved or set; kernels: -1."""
    blocks: I64
    """Kernels: blocks in the grid (gridX x gridY x gridZ); -1 for the other tables."""
    threads_per_block: I64

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


@dataclass(frozen=True)
class Calls:
    """CUDA runtime and driver API calls (``CUPTI_ACTIVITY_KIND_RUNTIME``)."""

    start_ns: I64
    end_ns: I64
    pid: I64
    tid: I64
    correlation: I64
    name: I64
    """``StringIds`` id of the function's name (with nsys's version suffix, ``cudaLaunchKernel_v7000``)."""

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


_ACTIVITY_FIELDS = ("start_ns", "end_ns", "pid", "device", "context", "stream", "correlation", "name", "src_kind",
                    "dst_kind", "bytes", "blocks", "threads_per_block")
_CALL_FIELDS = ("start_ns", "end_ns", "pid", "tid", "correlation", "name")


def kernels(db: Export) -> Activity:
    extra = {"name": _first(db, KERNEL, "demangledName", "shortName", "mangledName")}
    if db.has(KERNEL, "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"):
        extra |= {"blocks": "coalesce(gridX * gridY * gridZ, -1)",
                  "threads_per_block": "coalesce(blockX * blockY * blockZ, -1)"}
    return _activity(db, KERNEL, extra)


def copies(db: Export) -> Activity:
    return _activity(db, MEMCPY, {"name": _col(db, MEMCPY, "copyKind"), "src_kind": _col(db, MEMCPY, "srcKind"),
                                  "dst_kind": _col(db, MEMCPY, "dstKind"), "bytes": _col(db, MEMCPY, "bytes")})


def memsets(db: Export) -> Activity:
    return _activity(db, MEMSET, {"name": _col(db, MEMSET, "memKind"), "bytes": _col(db, MEMSET, "bytes")})


def syncs(db: Export) -> Activity:
    return _activity(db, SYNC, {"name": _first(db, SYNC, "syncType", "deprecatedSyncType")})


def calls(db: Export) -> Calls:
    if not db.has(RUNTIME, "start", "end", "globalTid", "nameId"):
        return Calls(*(np.zeros(0, np.int64) for _ in _CALL_FIELDS))
    sql = (f"SELECT start, end, {_pid('globalTid')}, coalesce(globalTid & {ID_MASK}, -1), "
           f"{_col(db, RUNTIME, 'correlationId')}, coalesce(nameId, -1) FROM {RUNTIME} "
           "WHERE end IS NOT NULL AND start IS NOT NULL")
    return Calls(*db.numbers(sql, _CALL_FIELDS, table=RUNTIME))


def contexts(db: Export) -> dict[tuple[int, int], int]:
    """(pid, CUDA context) -> the CUDA device it is on (``TARGET_INFO_CUDA_CONTEXT_INFO``)."""
    table = "TARGET_INFO_CUDA_CONTEXT_INFO"
    if not db.has(table, "processId", "contextId", "deviceId"):
        return {}
    return {(int(p), int(c)): int(d) for p, c, d in db.rows(f"SELECT processId, contextId, deviceId FROM {table}")
            if p is not None and c is not None and d is not None}


def names(db: Export, ids: I64) -> dict[int, str]:
    """The text of each ``StringIds`` id in ``ids`` (an id the table lacks is left out)."""
    wanted = np.unique(ids[ids >= 0]).tolist()
    out: dict[int, str] = {}
    for lo in range(0, len(wanted), 500):  # SQLite binds at most 999 parameters a query (before 3.32)
        part = wanted[lo:lo + 500]
        marks = ",".join("?" * len(part))
        out.update((int(i), str(v)) for i, v in db.rows(f"SELECT id, value FROM StringIds WHERE id IN ({marks})",
                                                        tuple(part)))
    return out


def _activity(db: Export, table: str, extra: dict[str, str]) -> Activity:
    """The table's rows; each field ``extra`` does not give (an SQL expression each) is -1."""
    if not db.has(table, "start", "end"):
        return Activity(*(np.zeros(0, np.int64) for _ in _ACTIVITY_FIELDS))
    given = {"start_ns": "start", "end_ns": "end", "pid": _pid("globalPid") if db.has(table, "globalPid") else "-1",
             "device": _col(db, table, "deviceId"), "context": _col(db, table, "contextId"),
             "stream": _col(db, table, "streamId"), "correlation": _col(db, table, "correlationId"), **extra}
    fields = tuple(given)
    sql = f"SELECT {', '.join(given.values())} FROM {table} WHERE end IS NOT NULL AND start IS NOT NULL"
    cols = dict(zip(fields, db.numbers(sql, fields, table=table)))
    n = len(cols["start_ns"])
    return Activity(**{f: cols[f] if f in cols else np.full(n, -1, np.int64) for f in _ACTIVITY_FIELDS})


def _pid(column: str) -> str:
    """The process of a serialised ``globalPid`` or ``globalTid`` column (-1 where NULL)."""
    return f"coalesce(({column} >> {PID_SHIFT}) & {ID_MASK}, -1)"


def _col(db: Export, table: str, column: str) -> str:
    """The column where the table has it (NULL read as -1), else -1."""
    return f"coalesce({column}, -1)" if db.has(table, column) else "-1"


def _first(db: Export, table: str, *columns: str) -> str:
    """The first of ``columns`` the table has that is not NULL in a row, else -1."""
    present = [c for c in columns if db.has(table, c)]
    return f"coalesce({', '.join(present)}, -1)" if present else "-1"
