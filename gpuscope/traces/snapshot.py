"""Read a PyTorch memory snapshot (``torch.cuda.memory._dump_snapshot``, a pickle, optionally gzipped) into
``model.snapshot.MemorySnapshot``, safely and in bounded memory.

A snapshot is a pickle, and a pickle can run code: it is read by ``pickle_stream``, which builds plain data only
and refuses anything else before it runs (every pickle protocol, 5 included). It is read as a stream: each trace
entry is folded into columns the moment it is read and each stack frame into an interned id, so the memory held is
at most ``READ_BYTES_PER_ACTION`` per allocator action plus each distinct frame and stack once and a few MiB of
read buffer, however large the file (``ACTION_BYTES`` per action are kept; tested in
``tests/traces/test_snapshot.py``).
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import IO, Any

import numpy as np

from gpuscope.model.snapshot import (
    ACTION_NAMES,
    NO_STACK,
    Action,
    Actions,
    Annotation,
    Blocks,
    DeviceSnapshot,
    Frame,
    MemorySnapshot,
    Oom,
    Segments,
)
from gpuscope.traces.errors import TraceError
from gpuscope.traces.limits import not_regular
from gpuscope.traces.pickle_stream import DROP, load_stream
from gpuscope.traces.plain_pickle import NotPlainData

MAX_ACTIONS = 200_000_000
"""At ``ACTION_BYTES`` each, about 6 GB of columns: past it a snapshot is refused rather than read."""
ACTION_BYTES = 37
"""Kept per action: its code (1 byte), address, size, time and stream (8 each) and stack id (4)."""
READ_BYTES_PER_ACTION = 80
"""Held per action while reading, at most: its columns, the pickle's memo slot for the entry (and for its frames
list where that is not shared) and the copy of one column as the columns are joined (72 measured)."""
_FLUSH = 4_096
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _FrameRef:
    __slots__ = ("id",)

    def __init__(self, id_: int) -> None:
        self.id = id_


class _StackRef:
    __slots__ = ("id",)

    def __init__(self, id_: int) -> None:
        self.id = id_


class _ActionColumns:
    """One device's trace entries as they are read: a short list of rows, turned into typed column arrays every
    ``_FLUSH`` entries so that what is held per entry is its ``ACTION_BYTES``."""

    _DTYPES = (np.uint8, np.int64, np.int64, np.int64, np.int32, np.int64)

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int, int, int]] = []
        self.parts: list[list[np.ndarray[Any, Any]]] = [[] for _ in self._DTYPES]
        self.ooms: list[tuple[int, int, int | None]] = []
        self.count = 0

    def add(self, row: tuple[int, int, int, int, int, int]) -> None:
        self.rows.append(row)
        self.count += 1
        if len(self.rows) >= _FLUSH:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            for column, values, dtype in zip(self.parts, zip(*self.rows), self._DTYPES):
                column.append(np.fromiter(values, dtype=dtype, count=len(self.rows)))
            self.rows = []

    def finish(self) -> Actions:
        self.flush()
        if not self.count:
            return Actions.empty()
        columns = []
        for i, dtype in enumerate(self._DTYPES):  # one column at a time: the copy made here is one column's
            parts, self.parts[i] = self.parts[i], []
            columns.append(np.concatenate(parts) if len(parts) > 1 else parts[0].astype(dtype, copy=False))
        return Actions(action=columns[0], addr=columns[1], size_bytes=columns[2], time_us=columns[3],
                       stack_id=columns[4], stream=columns[5])


class _Folder:
    """The reducer: trace entries into columns (dropped from the object tree), frames and stacks into ids."""

    def __init__(self, max_actions: int) -> None:
        self.frames: dict[tuple[str, str, int], int] = {}
        self.frame_refs: list[_FrameRef] = []
        self.stacks: dict[tuple[int, ...], _StackRef] = {}
        self.columns: dict[int, _ActionColumns] = {}
        self.max_actions = max_actions
        self.actions = 0
        self.bad_entries = 0
        self.unknown_actions: set[str] = set()

    def __call__(self, container: Any, key: Any, item: Any) -> Any:
        if key is None:
            if type(item) is dict:
                if "action" in item:
                    self._entry(container, item)
                    return DROP
                if "filename" in item and "line" in item and "name" in item and len(item) <= 4:
                    return self._frame(item)
            return item
        if key == "frames" and type(item) is list:
            return self._stack(item)
        return item

    def _frame(self, item: dict[Any, Any]) -> Any:
        name, filename, line = item["name"], item["filename"], item["line"]
        if not (isinstance(name, str) and isinstance(filename, str) and type(line) is int):
            return item
        key = (name, filename, line)
        fid = self.frames.get(key)
        if fid is None:
            fid = self.frames[key] = len(self.frames)
            self.frame_refs.append(_FrameRef(fid))
        return self.frame_refs[fid]

    def _stack(self, frames: list[Any]) -> _StackRef:
        ids = tuple(f.id for f in frames if type(f) is _FrameRef)
        ref = self.stacks.get(ids)
        if ref is None:
            ref = self.stacks[ids] = _StackRef(len(self.stacks))
        return ref

    def _entry(self, container: Any, item: dict[Any, Any]) -> None:
        action = ACTION_NAMES.get(item["action"]) if isinstance(item["action"], str) else None
        if action is None:
            self.unknown_actions.add(str(item["action"])[:40])
            return
        values = [item.get(k, 0) for k in ("addr", "size", "time_us", "stream")]
        if not all(type(v) is int and _INT64_MIN <= v <= _INT64_MAX for v in values) or values[1] < 0:
            self.bad_entries += 1
            return
        frames = item.get("frames")
        stack = frames.id if type(frames) is _StackRef else NO_STACK
        self.actions += 1
        if self.actions > self.max_actions:
            raise _TooMany
        cols = self.columns.get(id(container))
        if cols is None:
            cols = self.columns[id(container)] = _ActionColumns()
        if action == Action.OOM:
            free = item.get("device_free")
            cols.ooms.append((cols.count, values[1], free if type(free) is int else None))
        cols.add((int(action), values[0], values[1], values[2], stack, values[3]))


class _TooMany(Exception):
    pass


def read_snapshot(path: Path | str, *, max_actions: int = MAX_ACTIONS) -> MemorySnapshot:
    """The snapshot in ``path``; a TraceError (one line naming the file) for anything that is not a readable
    snapshot, a pickle that would run code included (refused before any of it runs)."""
    path = Path(path)
    folder = _Folder(max_actions)
    try:
        with _open(path) as f:
            top = load_stream(f, reduce=folder)
    except NotPlainData as exc:
        raise TraceError(path, f"refused: {exc}" if exc.refused else str(exc)) from None
    except _TooMany:
        raise TraceError(path, f"more than {max_actions:,} allocator actions, over the limit") from None
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise TraceError(path, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return _snapshot(path, top, folder)


def _open(path: Path) -> IO[bytes]:  # a BufferedReader, or a GzipFile over one: both read bytes
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    f = os.fdopen(fd, "rb")
    kind = not_regular(os.fstat(fd).st_mode)
    if kind is not None:
        f.close()
        raise TraceError(path, f"{kind}, not a memory snapshot")
    head = f.peek(2)[:2] if hasattr(f, "peek") else b""
    if not head:
        f.close()
        raise TraceError(path, "the file is empty")
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f, mode="rb")  # type: ignore[return-value]
    return f


def _snapshot(path: Path, top: Any, folder: _Folder) -> MemorySnapshot:
    if isinstance(top, list) and all(isinstance(s, dict) for s in top):  # ``memory_snapshot()``: segments alone
        top = {"segments": top}
    if not isinstance(top, dict) or not isinstance(top.get("segments"), list):
        raise TraceError(path, "not a PyTorch memory snapshot (no segments; written by "
                               "torch.cuda.memory._dump_snapshot?)")
    found = top.get("device_traces")
    traces: list[Any] = found if isinstance(found, list) else []
    by_device: dict[int, Actions] = {}
    ooms: dict[int, tuple[Oom, ...]] = {}
    for device, trace in enumerate(traces):
        cols = folder.columns.pop(id(trace), None)
        if cols is not None:
            by_device[device] = cols.finish()
            ooms[device] = tuple(Oom(index=i, requested_bytes=size, device_free_bytes=free)
                                 for i, size, free in cols.ooms)
    segments, blocks = _segments(top["segments"])
    devices = sorted(set(by_device) | set(segments))
    warnings = []
    if folder.bad_entries:
        warnings.append(f"{folder.bad_entries} trace entries with a field of the wrong type were left out")
    if folder.unknown_actions:
        warnings.append(f"trace entries of unknown actions were left out: {', '.join(sorted(folder.unknown_actions))}")
    if not traces:
        warnings.append("no allocator trace: the snapshot was taken without _record_memory_history, so only its "
                        "end state is known")
    frame_of = {fid: key for key, fid in folder.frames.items()}
    stacks = sorted(folder.stacks.items(), key=lambda item: item[1].id)
    return MemorySnapshot(
        source=str(path), frames=tuple(Frame(*frame_of[i]) for i in range(len(frame_of))),
        stacks=tuple(ids for ids, _ in stacks),
        devices=tuple(DeviceSnapshot(device=d, actions=by_device.get(d, Actions.empty()),
                                     segments=segments.get(d, Segments.empty()), blocks=blocks.get(d, Blocks.empty()),
                                     ooms=ooms.get(d, ())) for d in devices),
        expandable_segments=_expandable(top.get("allocator_settings")), annotations=_annotations(top),
        warnings=tuple(warnings))


def _segments(raw: list[Any]) -> tuple[dict[int, Segments], dict[int, Blocks]]:
    seg_rows: dict[int, list[tuple[int, int, int, bool]]] = {}
    block_rows: dict[int, list[tuple[int, int, int, bool, int]]] = {}
    for seg in raw:
        if not isinstance(seg, dict) or not _ints(seg, "device", "address", "total_size"):
            continue
        device = seg["device"]
        found = seg.get("blocks")
        blocks: list[Any] = found if isinstance(found, list) else []
        address = seg["address"]
        requested = 0
        for block in blocks:
            if not isinstance(block, dict) or not _ints(block, "size"):
                continue
            at = block["address"] if _ints(block, "address") else address  # older snapshots: blocks in order
            asked = block["requested_size"] if _ints(block, "requested_size") else block["size"]
            is_allocated = block.get("state") == "active_allocated"
            requested += asked if is_allocated else 0
            frames = block.get("frames")
            block_rows.setdefault(device, []).append(
                (at, block["size"], asked, is_allocated, frames.id if type(frames) is _StackRef else NO_STACK))
            address = at + block["size"]
        seg_rows.setdefault(device, []).append((seg["address"], seg["total_size"], requested,
                                                seg.get("is_expandable") is True))
    segments = {d: Segments(address=np.array([r[0] for r in rows], np.int64),
                            total_bytes=np.array([r[1] for r in rows], np.int64),
                            allocated_bytes=np.array([r[2] for r in rows], np.int64),
                            expandable=np.array([r[3] for r in rows], bool)) for d, rows in seg_rows.items()}
    blocks_out = {d: Blocks(address=np.array([r[0] for r in rows], np.int64),
                            size_bytes=np.array([r[1] for r in rows], np.int64),
                            requested_bytes=np.array([r[2] for r in rows], np.int64),
                            allocated=np.array([r[3] for r in rows], bool),
                            stack_id=np.array([r[4] for r in rows], np.int32)) for d, rows in block_rows.items()}
    return segments, blocks_out


def _ints(d: dict[Any, Any], *keys: str) -> bool:
    """The keys hold integers a column can hold (int64, sizes not negative)."""
    return all(type(v := d.get(k)) is int and _INT64_MIN <= v <= _INT64_MAX and (v >= 0 or "size" not in k)
               for k in keys)


def _expandable(settings: Any) -> bool | None:
    if isinstance(settings, dict) and isinstance(settings.get("expandable_segments"), bool):
        return bool(settings["expandable_segments"])
    return None


def _annotations(top: dict[Any, Any]) -> tuple[Annotation, ...]:
    raw = top.get("external_annotations")
    if not isinstance(raw, list):
        return ()
    return tuple(Annotation(stage=a["stage"], name=a["name"], device=a.get("device", 0)
                            if type(a.get("device")) is int else 0, time_us=a["time_us"])
                 for a in raw if isinstance(a, dict) and isinstance(a.get("stage"), str)
                 and isinstance(a.get("name"), str) and type(a.get("time_us")) is int)
