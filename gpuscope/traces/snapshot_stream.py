"""A memory snapshot read by the streaming reader (``pickle_stream``): each trace entry folded into columns the
moment it is read and each stack frame into an interned id, so the memory held is at most
``READ_BYTES_PER_ACTION`` per allocator action plus each distinct frame and stack once and a few MiB of read
buffer, however large the file. Five to ten times slower than the C unpickler (``snapshot_fold``): used for a
small pickle, for one too large for the C unpickler's memory, and where there is no fork.
"""

from __future__ import annotations

from typing import IO, Any

from gpuscope.model.snapshot import NO_STACK, MemorySnapshot
from gpuscope.traces.pickle_stream import DROP, load_stream
from gpuscope.traces.snapshot_layout import ActionColumns, Folded, Rows, assemble, frame_key

READ_BYTES_PER_ACTION = 80
"""Held per action while reading, at most: its columns, the pickle's memo slot for the entry (and for its frames
list where that is not shared) and the copy of one column as the columns are joined (72 measured)."""


class _FrameRef:
    __slots__ = ("id",)

    def __init__(self, id_: int) -> None:
        self.id = id_


class _StackRef:
    __slots__ = ("id",)

    def __init__(self, id_: int) -> None:
        self.id = id_


class _Folder:
    """The reducer: trace entries into columns (dropped from the object tree), frames and stacks into ids."""

    def __init__(self, rows: Rows) -> None:
        self.folded = Folded()
        self.frames: dict[tuple[str, str, int], int] = {}
        self.frame_refs: list[_FrameRef] = []
        self.stacks: dict[tuple[int, ...], _StackRef] = {}
        self.columns: dict[int, ActionColumns] = {}
        self.rows = rows

    def __call__(self, container: Any, key: Any, item: Any) -> Any:
        if key is None:
            if type(item) is dict:
                if "action" in item:
                    self._entry(container, item)
                    return DROP
                found = frame_key(item)
                if found is not None:
                    return self._frame(found)
            return item
        if key == "frames" and type(item) is list:
            return self._stack(item)
        return item

    def _frame(self, key: tuple[str, str, int]) -> _FrameRef:
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
        cols = self.columns.get(id(container))
        if cols is None:
            cols = self.columns[id(container)] = ActionColumns()
        frames = item.get("frames")
        cols.add(item, frames.id if type(frames) is _StackRef else NO_STACK, self.folded, self.rows)


def read_streaming(f: IO[bytes], *, size_bytes: int, rows: Rows) -> MemorySnapshot:
    """The snapshot in ``f`` (``size_bytes`` of pickle), read as it streams by; ``NotPlainData`` (one line) for
    what is not a readable snapshot."""
    folder = _Folder(rows)
    top = load_stream(f, reduce=folder, size_bytes=size_bytes)
    folded = folder.folded
    found = top.get("device_traces") if isinstance(top, dict) else None
    for device, trace in enumerate(found if isinstance(found, list) else []):
        cols = folder.columns.pop(id(trace), None)
        columns = cols.finish() if cols is not None else None
        if columns is not None:
            folded.traces[device] = columns
    folded.frames = list(folder.frames)  # in the order they were numbered
    folded.stacks = list(folder.stacks)
    return assemble("", top, folded, lambda frames: frames.id if type(frames) is _StackRef else NO_STACK, rows)
