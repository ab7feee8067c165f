"""What a saved rank's columns must hold: what the trace reader makes, and nothing it never makes.

A ``.npz`` whose bytes decode may still be damaged where it matters: a duration that is negative or longer than any
event, a time outside the range every reader keeps to, an event kind or precision that has no meaning, events out
of time order, a column of another type. Read on, such a file would show as "GPU work -337000000000 µs"; checked
here, it is the store's one line naming the file (``RecordDamaged``), as a file cut short is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuscope.model.trace import DUR_MAX_NS, TS_MAX_NS, TS_MIN_NS, Kind, Precision

EVENT_DTYPES: Mapping[str, type[np.generic]] = {
    "ts_ns": np.int64, "dur_ns": np.int64, "kind": np.uint8, "name_id": np.int32, "tid": np.int64,
    "stream": np.int32, "device": np.int32, "correlation": np.int64, "external_id": np.int64, "bytes": np.int64,
    "blocks_per_sm": np.float32, "warps_per_sm": np.float32, "precision": np.uint8, "shape_id": np.int32,
    "sequence": np.int64,
}
MEMORY_DTYPES: Mapping[str, type[np.generic]] = {
    "ts_ns": np.int64, "bytes": np.int64, "total_allocated_bytes": np.int64, "device_type": np.int32,
    "device_id": np.int32, "addr": np.int64, "total_reserved_bytes": np.int64, "tid": np.int64,
}
COLLECTIVE_DTYPES: Mapping[str, type[np.generic]] = {
    "ts_ns": np.int64, "dur_ns": np.int64, "external_id": np.int64, "in_nelems": np.int64, "out_nelems": np.int64,
    "group_size": np.int64, "seq": np.int64,
}


def typed(columns: dict[str, npt.NDArray[Any]], dtypes: Mapping[str, type[np.generic]],
          group: str) -> dict[str, npt.NDArray[Any]]:
    """``columns`` in the model's types: a narrower integer is widened, anything else (a float where an integer
    belongs, an integer past the column's width) is damage (``ValueError``)."""
    out = {}
    for name, column in columns.items():
        wanted = np.dtype(dtypes[name])
        if column.dtype != wanted and not np.can_cast(column.dtype, wanted, casting="safe"):
            raise ValueError(f"its {group} column {name} holds {column.dtype}, not {wanted}")
        out[name] = column.astype(wanted, copy=False)
    return out


def check_events(columns: Mapping[str, npt.NDArray[np.generic]], names: int, shapes: int) -> None:
    """The ranges of the event columns (``ValueError`` naming the first one out of range)."""
    _times(columns["ts_ns"], "an event")
    _durations(columns["dur_ns"], "an event")
    if columns["ts_ns"].size > 1 and bool((np.diff(columns["ts_ns"]) < 0).any()):
        raise ValueError("its events are not in time order")
    _below(columns["kind"], max(Kind) + 1, "an event's kind")
    _below(columns["name_id"], names, f"an event's name id (its name table holds {names})")
    if "precision" in columns:
        _below(columns["precision"], max(Precision) + 1, "an event's precision")
    ids = columns.get("shape_id")
    if ids is not None and ids.size and (int(ids.min()) < -1 or int(ids.max()) >= shapes):  # -1: no shape
        raise ValueError(f"an event's shape id is outside -1 to {shapes - 1} (its shape table holds {shapes})")


def check_memory(columns: Mapping[str, npt.NDArray[np.generic]]) -> None:
    """The ranges of the memory event columns."""
    _times(columns["ts_ns"], "a memory event")
    if columns["ts_ns"].size > 1 and bool((np.diff(columns["ts_ns"]) < 0).any()):
        raise ValueError("its memory events are not in time order")


def check_collectives(columns: Mapping[str, npt.NDArray[np.generic]]) -> None:
    """The ranges of the collective ops' columns."""
    _times(columns["ts_ns"], "a collective")
    _durations(columns["dur_ns"], "a collective")


def _times(ts_ns: npt.NDArray[np.generic], what: str) -> None:
    if ts_ns.size and (int(ts_ns.min()) < TS_MIN_NS or int(ts_ns.max()) > TS_MAX_NS):
        raise ValueError(f"{what}'s time is outside {TS_MIN_NS} to {TS_MAX_NS} ns "
                         f"({int(ts_ns.min())} to {int(ts_ns.max())})")


def _durations(dur_ns: npt.NDArray[np.generic], what: str) -> None:
    if dur_ns.size and (int(dur_ns.min()) < 0 or int(dur_ns.max()) > DUR_MAX_NS):
        low, high = int(dur_ns.min()), int(dur_ns.max())
        raise ValueError(f"{what}'s duration is {low if low < 0 else high} ns, outside 0 to 7 days")


def _below(values: npt.NDArray[np.generic], limit: int, what: str) -> None:
    if values.size and (int(values.min()) < 0 or int(values.max()) >= limit):
        raise ValueError(f"{what} is outside 0 to {limit - 1}")
