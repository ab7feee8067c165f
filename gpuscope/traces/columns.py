"""Decoded events into the columnar arrays of ``model.trace``, one chunk of events at a time.

Names, categories and thread ids are interned across chunks, so a trace read in chunks gives the
same columns as one read whole.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import count
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from gpuscope.model.trace import CPU_KINDS, GPU_KINDS, CollectiveOps, Events, Kind, MemoryEvents, OpShape
from gpuscope.traces.events import KINDS, NO_ARGS, UNREAD_DEVICES, Args, Event
from gpuscope.traces.precision import classify_table
from gpuscope.traces.setup import FirstLayerCall

_T = TypeVar("_T")
_HOST_KINDS = np.array((Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON), dtype=np.uint8)
_HOST_CATS = frozenset(cat for cat, kind in KINDS.items() if kind in CPU_KINDS)
_OP_CATS = frozenset(cat for cat, kind in KINDS.items() if kind == Kind.CPU_OP)
_EVENT_COLUMNS = ("ts_us", "dur_us", "cat_id", "name_id", "tid_id", "stream", "device", "correlation",
                  "external_id", "bytes", "blocks_per_sm", "warps_per_sm", "types_id", "shape_id",
                  "sequence")
_MEMORY_COLUMNS = ("ts_us", "bytes", "total_allocated_bytes", "device_type", "device_id", "addr",
                   "total_reserved_bytes", "tid")


class ColumnBuilder:
    """Accumulates chunks of decoded events; ``finish`` sorts them by time into Events and MemoryEvents.

    A file's events may be read in stretches by several builders (``gpuscope.traces.split``): each later one starts
    at ``offset``, its first event's position in the file, and ``join`` takes it into the builder of the stretches
    before it, which then holds what one builder reading them all would."""

    def __init__(self, offset: int = 0) -> None:
        self._offset = offset
        self._names: dict[str, int] = {}
        self._cats: dict[str, int] = {}
        self._tids: dict[int | str, int] = {}
        self._types: dict[tuple[str, ...] | None, int] = {}
        self._shapes: dict[tuple[bytes, tuple[str, ...] | None, bytes] | None, int] = {None: -1}
        self.pid: int | None = None
        """The process that recorded the trace: the pid of its first host event (None without any)."""
        self._seen = offset
        """The position of the next event: interned values are keyed by the position of their first appearance,
        which only grows (``offset`` plus the events added; ``finish`` numbers the values in that order)."""
        self._events: dict[str, list[npt.NDArray[Any]]] = {c: [] for c in _EVENT_COLUMNS}
        self._comms: list[tuple[Event, Args]] = []
        self._memory: dict[str, list[npt.NDArray[Any]]] = {c: [] for c in _MEMORY_COLUMNS}
        self.first_layer = FirstLayerCall()
        """The model's first layer call and its input shapes (``gpuscope.traces.setup``)."""
        self.unread: dict[str, int] = {}
        """Events of each accelerator that is not a GPU (``UNREAD_DEVICES``), set by ``finish``."""

    def add(self, raw: list[Event]) -> None:
        xs = [e for e in raw if e.ph == "X" and e.ts == e.ts]  # ts != ts: missing (NaN)
        mem = [e for e in raw if e.ph == "i" and e.name == "[memory]" and e.args is not None and e.ts == e.ts]
        if xs:
            self._add_events(xs)
        if mem:
            self._add_memory(mem)

    def _add_events(self, xs: list[Event]) -> None:
        if self.pid is None:
            self.pid = next((e.pid for e in xs if isinstance(e.pid, int) and e.cat.lower() in _HOST_CATS), None)
        args = [e.args or NO_ARGS for e in xs]
        self._comms.extend((e, a) for e, a in zip(xs, args) if a.in_nelems >= 0)
        ext = _column([a.external_id for a in args], np.int64)
        cols = self._events
        cat_first = _first_seen(self._cats, [e.cat for e in xs], self._seen)
        ops = np.flatnonzero(np.isin(cat_first, [pos for cat, pos in self._cats.items()
                                                 if cat.lower() in _OP_CATS])).tolist()
        self.first_layer.add(xs, args)
        cols["ts_us"].append(_column([e.ts for e in xs], np.float64))
        cols["dur_us"].append(_column([e.dur for e in xs], np.float64))
        cols["cat_id"].append(cat_first)
        cols["name_id"].append(_first_seen(self._names, [e.name for e in xs], self._seen))
        cols["tid_id"].append(_first_seen(self._tids, [e.tid for e in xs], self._seen))
        cols["types_id"].append(_first_seen(self._types, [a.input_types for a in args], self._seen))
        cols["shape_id"].append(self._shape_ids(len(xs), ops, [args[k] for k in ops]))
        self._seen += len(xs)
        stream = _column([a.stream for a in args], np.int64)
        cols["stream"].append(np.where(stream > np.iinfo(np.int32).max, -1, stream).astype(np.int32))
        cols["device"].append(_column([a.device for a in args], np.int32))
        cols["correlation"].append(_column([a.correlation for a in args], np.int64))
        cols["external_id"].append(np.where(ext >= 0, ext, _column([a.external_id_lc for a in args], np.int64)))
        cols["sequence"].append(_column([a.sequence for a in args], np.int64))
        cols["bytes"].append(_column([a.bytes for a in args], np.int64))
        cols["blocks_per_sm"].append(_column([a.blocks_per_sm for a in args], np.float32))
        cols["warps_per_sm"].append(_column([a.warps_per_sm for a in args], np.float32))

    def join(self, later: ColumnBuilder) -> None:
        """Take in ``later``, which read the events after this builder's (its ``offset`` at or past every
        position this one gave): a value both saw keeps this builder's first position, and ``later``'s columns
        are moved to it, so the codes ``finish`` gives are those of one builder that read every event."""
        tables: dict[str, tuple[dict[Any, int], dict[Any, int]]] = {
            "cat_id": (self._cats, later._cats), "name_id": (self._names, later._names),
            "tid_id": (self._tids, later._tids), "types_id": (self._types, later._types),
            "shape_id": (self._shapes, later._shapes)}
        for column in _EVENT_COLUMNS:
            parts = later._events[column]
            if column in tables:
                move = _merge(*tables[column], span=(later._offset, later._seen))
                parts = parts if move is None else [move(part) for part in parts]
            self._events[column].extend(parts)
        for column in _MEMORY_COLUMNS:
            self._memory[column].extend(later._memory[column])
        self._comms.extend(later._comms)
        self.first_layer.join(later.first_layer)
        if self.pid is None:
            self.pid = later.pid
        self._seen = later._seen

    def _shape_ids(self, n: int, ops: list[int], op_args: list[Args]) -> npt.NDArray[np.int64]:
        """Each event's input shapes (host ops with ``Input Dims``) as the position where they first appeared
        (``finish`` numbers them in that order); -1 for the rest. A training loop repeats its shapes every step, so
        the table stays small. Only the host ops (positions ``ops``, their args ``op_args``) are looked at."""
        keys = [(dims, a.input_types, bytes(a.concrete_inputs)) if (dims := bytes(a.input_dims)
                                                                       or bytes(a.input_dims_2021)) else None
                for a in op_args]
        out = np.full(n, -1, dtype=np.int64)
        out[ops] = _first_seen(self._shapes, keys, self._seen)  # None (no dims) is -1 in the table
        return out

    def shapes(self) -> tuple[OpShape, ...]:
        """The interned input shapes, in the order ``shape_id`` numbers them (their first appearance)."""
        rows = sorted(((pos, key) for key, pos in self._shapes.items() if key is not None), key=lambda r: r[0])
        return tuple(OpShape(dims=d.decode("utf-8", "replace"), types=tuple(t or ()),
                             concrete=c.decode("utf-8", "replace")) for _, (d, t, c) in rows)

    def collectives(self) -> CollectiveOps:
        """The host collective ops that recorded their message sizes, in time order."""
        if not self._comms:
            return CollectiveOps.empty()
        rows = sorted(self._comms, key=lambda ea: ea[0].ts)
        ext = [a.external_id if a.external_id >= 0 else a.external_id_lc for _, a in rows]
        return CollectiveOps(
            ts_ns=us_to_ns(_column([e.ts for e, _ in rows], np.float64)),
            dur_ns=np.rint(_column([e.dur for e, _ in rows], np.float64) * 1000).astype(np.int64),
            external_id=_column(ext, np.int64), in_nelems=_column([a.in_nelems for _, a in rows], np.int64),
            out_nelems=_column([a.out_nelems for _, a in rows], np.int64),
            group_size=_column([a.group_size for _, a in rows], np.int64),
            op=tuple(a.collective or e.name for e, a in rows), dtype=tuple(a.dtype for _, a in rows),
            group=tuple(str(a.group_name) for _, a in rows), seq=_column([a.seq for _, a in rows], np.int64))

    def _add_memory(self, rows: list[Event]) -> None:
        args = [e.args or NO_ARGS for e in rows]
        cols = self._memory
        cols["ts_us"].append(_column([e.ts for e in rows], np.float64))
        cols["bytes"].append(_column([a.mem_bytes for a in args], np.int64))
        cols["total_allocated_bytes"].append(_column([a.total_allocated for a in args], np.int64))
        cols["device_type"].append(_column([a.device_type for a in args], np.int32))
        cols["device_id"].append(_column([a.device_id for a in args], np.int32))
        cols["addr"].append(_column([a.addr for a in args], np.int64))
        cols["total_reserved_bytes"].append(_column([a.total_reserved for a in args], np.int64))
        cols["tid"].append(_column([e.tid if type(e.tid) is int else -1 for e in rows], np.int64))

    def finish(self) -> tuple[Events, MemoryEvents, tuple[str, ...]]:
        c = {k: _concat(v, np.float64 if k in ("ts_us", "dur_us") else np.int64) for k, v in self._events.items()}
        shape_id = c.pop("shape_id")
        c["cat_id"], cats = _dense(c["cat_id"], self._cats, self._seen)
        self.unread = _unread(c["cat_id"], cats)
        c["name_id"], names = _dense(c["name_id"], self._names, self._seen)
        c["tid_id"], tids = _dense(c["tid_id"], self._tids, self._seen)
        types_id, types = _dense(c.pop("types_id"), self._types, self._seen)
        c["precision"] = classify_table(types)[types_id] if types else np.zeros(0, np.uint8)
        c["shape_id"] = _dense_shapes(shape_id, self._shapes)
        return self._finish_events(c, cats, names, tids), self._finish_memory(), names

    def _finish_events(self, c: dict[str, npt.NDArray[Any]], cats: tuple[str, ...], names: tuple[str, ...],
                       tids: tuple[int | str, ...]) -> Events:
        cat_kind = np.array([int(KINDS.get(cat.lower(), Kind.OTHER)) for cat in cats], dtype=np.uint8)
        kind = cat_kind[c["cat_id"]] if cat_kind.size else np.zeros(c["cat_id"].size, np.uint8)
        is_step = np.array([n.startswith("ProfilerStep#") for n in names], dtype=bool)
        if is_step.any():
            kind[np.isin(kind, _HOST_KINDS) & is_step[c["name_id"]]] = Kind.STEP
        tid_of, stream_of = _thread_ids(tids)
        tid = tid_of[c["tid_id"]] if tid_of.size else c["tid_id"]
        stream = c["stream"].astype(np.int32)
        # 2021 traces name GPU threads "stream 7" and may leave args.stream out.
        missing = np.isin(kind, np.array(GPU_KINDS, dtype=np.uint8)) & (stream < 0)
        if missing.any() and stream_of.size:
            stream[missing] = stream_of[c["tid_id"][missing]]
        ts_ns = us_to_ns(c["ts_us"])
        order = np.argsort(ts_ns, kind="stable")
        precision = np.where(kind == Kind.CPU_OP, c["precision"], np.uint8(0)).astype(np.uint8)
        return Events(
            ts_ns=ts_ns[order],
            dur_ns=np.maximum(np.rint(c["dur_us"] * 1000.0), 0).astype(np.int64)[order],
            kind=kind[order],
            name_id=c["name_id"].astype(np.int32)[order],
            tid=tid[order],
            stream=stream[order],
            device=c["device"].astype(np.int32)[order],
            correlation=c["correlation"][order],
            external_id=c["external_id"][order],
            bytes=c["bytes"][order],
            blocks_per_sm=c["blocks_per_sm"].astype(np.float32)[order],
            warps_per_sm=c["warps_per_sm"].astype(np.float32)[order],
            precision=precision[order],
            shape_id=c["shape_id"].astype(np.int32)[order],
            sequence=np.where(kind == Kind.CPU_OP, c["sequence"], -1)[order],
        )

    def _finish_memory(self) -> MemoryEvents:
        c = {k: _concat(v, np.float64 if k == "ts_us" else np.int64) for k, v in self._memory.items()}
        ts_ns = us_to_ns(c["ts_us"])
        order = np.argsort(ts_ns, kind="stable")
        return MemoryEvents(ts_ns=ts_ns[order], bytes=c["bytes"][order],
                            total_allocated_bytes=c["total_allocated_bytes"][order],
                            device_type=c["device_type"].astype(np.int32)[order],
                            device_id=c["device_id"].astype(np.int32)[order], addr=c["addr"][order],
                            total_reserved_bytes=c["total_reserved_bytes"][order], tid=c["tid"][order])


def _unread(cat_id: npt.NDArray[np.int64], cats: tuple[str, ...]) -> dict[str, int]:
    """Events per accelerator of ``UNREAD_DEVICES`` (none in a GPU trace)."""
    out: dict[str, int] = {}
    if not cats:
        return out
    counts = np.bincount(cat_id, minlength=len(cats))
    for cat, n in zip(cats, counts.tolist()):
        device = UNREAD_DEVICES.get(cat.lower())
        if device is not None and n:
            out[device] = out.get(device, 0) + n
    return out


def us_to_ns(us: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Epoch microseconds to int64 nanoseconds without float rounding of the whole part.

    ``us * 1000`` in float64 is ~1.6e18 for epoch times, past 2**53, so it would keep only 256 ns steps;
    the integer part converts exactly and only the fraction goes through floating point.
    """
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64)


def _column(values: list[Any], dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A list of Python numbers as an array: ``fromiter`` with a known count skips ``np.array``'s type inference."""
    return np.fromiter(values, dtype=dtype, count=len(values))


def _first_seen(table: dict[_T, int], values: list[_T], offset: int) -> npt.NDArray[np.int64]:
    """For each value, the position (from ``offset``) where it first appeared; ``table`` keeps them.

    ``map`` over ``dict.setdefault`` runs the hashing loop in C; ``_dense`` turns positions into codes.
    """
    return np.fromiter(map(table.setdefault, values, count(offset)), dtype=np.int64, count=len(values))


def _merge(mine: dict[Any, int], theirs: dict[Any, int],
           span: tuple[int, int]) -> Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]] | None:
    """Merge ``theirs`` (positions within ``span``) into ``mine``, where a value already there keeps its earlier
    position; what moves a column of ``theirs`` positions to the merged ones (None when nothing moved). Positions
    outside ``span`` (-1, no input shapes) stay as they are."""
    lo, hi = span
    table: npt.NDArray[np.int64] | None = None
    for value, pos in theirs.items():
        kept = mine.setdefault(value, pos)
        if kept != pos:
            if table is None:
                table = np.arange(lo, hi, dtype=np.int64)
            table[pos - lo] = kept
    if table is None:
        return None
    fixed = table

    def move(column: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        inside = (column >= lo) & (column < hi)
        return np.where(inside, fixed[np.where(inside, column - lo, 0)], column)

    return move


def _dense(first: npt.NDArray[np.int64], table: dict[_T, int],
           size: int) -> tuple[npt.NDArray[np.int64], tuple[_T, ...]]:
    """First-appearance positions into codes 0..k-1 (in order of appearance) and the table of distinct values."""
    uniques = sorted(table.items(), key=lambda item: item[1])
    remap = np.zeros(max(size, 1), dtype=np.int64)
    remap[[pos for _, pos in uniques]] = np.arange(len(uniques))
    return remap[first], tuple(value for value, _ in uniques)


def _dense_shapes(first: npt.NDArray[np.int64], table: dict[Any, int]) -> npt.NDArray[np.int64]:
    """First-appearance positions of input shapes into codes 0..k-1 in order of appearance; -1 stays -1."""
    positions = np.array(sorted(pos for key, pos in table.items() if key is not None), dtype=np.int64)
    out = np.full(first.shape[0], -1, dtype=np.int64)
    has = first >= 0
    out[has] = np.searchsorted(positions, first[has])
    return out


def _concat(parts: list[npt.NDArray[Any]], dtype: type[np.generic]) -> npt.NDArray[Any]:
    if not parts:
        return np.empty(0, dtype=dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _thread_ids(uniques: tuple[int | str, ...]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Per interned thread: its id as an int (names such as "stream 7" get negative ids), and the stream
    number a named GPU thread carries (-1 if none).

    Kineto of 2020-21 wrote every thread id as a string: host threads as the number itself ("4093687616", past
    int32), GPU rows as "stream 7". A string of digits alone is the thread's number; only a name followed by a
    number (in int32's range) names a stream."""
    tid = np.empty(len(uniques), dtype=np.int64)
    stream = np.full(len(uniques), -1, dtype=np.int32)
    named = 0
    for i, u in enumerate(uniques):
        if isinstance(u, int):
            tid[i] = u
            continue
        text = u.strip()
        if text.isdigit() and int(text) < 2**63:
            tid[i] = int(text)
            continue
        named += 1
        tid[i] = -1 - named
        head, _, digits = text.rpartition(" ")
        if head and digits.isdigit() and int(digits) < 2**31:
            stream[i] = int(digits)
    return tid, stream
