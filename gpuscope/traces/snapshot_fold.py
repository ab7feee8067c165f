"""A memory snapshot the C unpickler has built (``plain_data.PlainUnpickler``) folded into columns, a column at a
time: the entries of a device's trace are read field by field by C loops (``map``, ``numpy.fromiter``), and each
distinct frames list is interned once, however many entries share it. A trace whose entries are not all of the
plain form (a field of the wrong type, an unknown action) is read entry by entry, with the same rules as the
streaming reader (``snapshot_stream``), whose numbering of frames and stacks this one keeps.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter, methodcaller
from sys import getrefcount
from typing import Any

import numpy as np

from gpuscope.model.snapshot import ACTION_NAMES, NO_STACK, Action, Actions, MemorySnapshot
from gpuscope.traces.snapshot_layout import (
    ENTRY_FIELDS,
    MAX_DEVICES,
    ActionColumns,
    Folded,
    Rows,
    TraceColumns,
    assemble,
    frame_key,
    is_int64,
    segment_devices,
)

_CODES = {name: int(action) for name, action in ACTION_NAMES.items()}
_NOT_A_FRAME = -1
_CHUNK = 4_096
_ACTION = itemgetter("action")
_FRAMES = methodcaller("get", "frames")
_ALIKE_KEPT = 8
"""Frames lists kept to compare with per (length, middle item, last item): past them, a list's stack is found from
its frames."""
_HELD_ONCE = 3
"""``sys.getrefcount`` of an entry only its trace holds, while a slice of the trace is read (the trace, the slice,
the call's argument)."""


class _Interner:
    """Frames and stacks numbered in the order the pickle completes them; the objects the C unpickler built are
    alive throughout, so their ids stand for them (a frame dict or frames list the pickle shares is one object)."""

    def __init__(self, folded: Folded) -> None:
        self.folded = folded
        self.frames: dict[tuple[str, str, int], int] = {}
        self.stacks: dict[tuple[int, ...], int] = {}
        self.frame_of: dict[int, int] = {}
        """id(frame dict) -> frame id, or ``_NOT_A_FRAME``."""
        self.stack_of: dict[int, int] = {}
        """id(frames list) -> stack id."""
        self.alike: dict[tuple[int, int, int], list[tuple[list[Any], int]]] = {}
        """(length, id of the middle item, id of the last) -> frames lists seen and their stack ids."""
        self.entries_read: set[int] = set()
        """The ids of the entries read one by one."""

    def first_reading(self, entry: dict[Any, Any]) -> bool:
        """Whether this entry has not been read before (noting it as read). One dict the pickle puts in two places
        is read once, as the streaming reader reads it (it empties the dict's memo slot)."""
        if id(entry) in self.entries_read:
            return False
        self.entries_read.add(id(entry))
        return True

    def frame_ids(self, frames: list[Any]) -> tuple[int, ...]:
        if None in map(self.frame_of.get, map(id, frames)):
            for f in frames:
                if id(f) not in self.frame_of:
                    found = frame_key(f) if type(f) is dict else None
                    self.frame_of[id(f)] = _NOT_A_FRAME if found is None else self.frames.setdefault(
                        found, len(self.frames))
        ids = tuple(map(self.frame_of.__getitem__, map(id, frames)))
        return tuple(i for i in ids if i != _NOT_A_FRAME) if _NOT_A_FRAME in ids else ids

    def stack(self, frames: Any) -> int:
        """The stack id of a ``frames`` value (interning it, and its frames, when new); ``NO_STACK`` for one that
        is not a list."""
        sid = self.stack_of.get(id(frames))
        if sid is None:
            sid = self.stack_of[id(frames)] = self._list_stack(frames) if type(frames) is list else NO_STACK
        return sid

    def _list_stack(self, frames: list[Any]) -> int:
        """PyTorch pickles a list per entry, of the frame dicts it shares: a list equal to one seen (compared in C,
        item by item, identity first) has its stack, found among the few that look alike."""
        n = len(frames)
        alike = self.alike.setdefault((n, id(frames[n // 2]), id(frames[-1])) if n else (0, 0, 0), [])
        for other, sid in alike:
            try:
                if frames == other:
                    return sid
            except RecursionError:  # lists of deeply nested items: not frames, and not compared
                break
        sid = self.stacks.setdefault(self.frame_ids(frames), len(self.stacks))
        if len(alike) < _ALIKE_KEPT:
            alike.append((frames, sid))
        return sid

    def stacks_of(self, values: list[Any]) -> list[int]:
        """The stack ids of many ``frames`` values, each distinct one interned in the order it first appears."""
        found: list[int | None] = list(map(self.stack_of.get, map(id, values)))
        if None in found:
            for i, sid in enumerate(found):
                if sid is None:
                    found[i] = self.stack(values[i])
        return found  # type: ignore[return-value]  # no None left

    def segment_stacks(self, segment: dict[Any, Any]) -> None:
        """A segment's stack, and its blocks' before it (the unpickler completes them first)."""
        for key, value in segment.items():
            if key == "frames" and type(value) is list:
                self.frame_ids(value)
            elif key == "blocks" and type(value) is list:
                for block in value:
                    if type(block) is dict:
                        self.stack(block.get("frames"))
        self.stack(segment.get("frames"))


def fold(top: Any, rows: Rows) -> MemorySnapshot:
    """The snapshot the document ``top`` holds; ``NotPlainData`` (one line) when it is not one."""
    folded = Folded()
    interner = _Interner(folded)
    parts = top.items() if isinstance(top, dict) else [("segments", top)]
    for key, value in parts:  # in the pickle's order
        if key == "segments" and type(value) is list:
            for segment in value:
                if type(segment) is dict:
                    interner.segment_stacks(segment)
        elif key == "device_traces" and type(value) is list:
            _traces(value, segment_devices(top), interner, rows)
    folded.frames = list(interner.frames)
    folded.stacks = list(interner.stacks)
    return assemble("", top, folded, interner.stack, rows)


def _traces(traces: list[Any], in_segments: set[int], interner: _Interner, rows: Rows) -> None:
    """Each device's trace folded, up to the ``MAX_DEVICES`` devices of the lowest index (those of the segments
    counted): a device past them is not read at all."""
    below = sorted(in_segments)
    only_traced = 0
    for device, trace in enumerate(traces):
        if bisect_left(below, device) + only_traced >= MAX_DEVICES:
            interner.folded.unread_devices = {d for d, rest in enumerate(traces) if d >= device and type(rest) is list
                                              and rest}
            return
        if type(trace) is list:
            columns = _trace(trace, interner, rows)
            if columns is not None:
                interner.folded.traces[device] = columns
                only_traced += device not in in_segments


def _trace(trace: list[Any], interner: _Interner, rows: Rows) -> TraceColumns | None:
    n = len(trace)
    action = np.empty(n, np.uint8)
    fields = [np.empty(n, np.int64) for _ in ENTRY_FIELDS]
    stack = np.empty(n, np.int32)
    # A chunk at a time, every field of it: its dicts are still in the CPU's cache for the second field on.
    try:  # a TypeError for an item that is not a dict or a field that is not an int, a KeyError for an action
        for start in range(0, n, _CHUNK):  # that is not one of PyTorch's, an OverflowError past int64
            part = trace[start:start + _CHUNK]
            end = start + len(part)
            if max(map(getrefcount, part)) > _HELD_ONCE:  # an entry in two places: read once, one by one
                return _entry_by_entry(trace, interner, rows)
            action[start:end] = list(map(_CODES.__getitem__, map(_ACTION, part)))
            for key, column in zip(ENTRY_FIELDS, fields):
                column[start:end] = _ints(part, key)
            stack[start:end] = interner.stacks_of(list(map(_FRAMES, part)))
    except (KeyError, TypeError, OverflowError):
        return _entry_by_entry(trace, interner, rows)
    addr, size, time_us, stream = fields
    if not n or (size < 0).any():
        return _entry_by_entry(trace, interner, rows)
    rows.add(n)
    ooms = []
    for i in np.flatnonzero(action == Action.OOM).tolist():
        free = trace[i].get("device_free")
        ooms.append((i, int(size[i]), free if is_int64(free) else None))
    return TraceColumns(Actions(action=action, addr=addr, size_bytes=size, time_us=time_us, stack_id=stack,
                                stream=stream), ooms)


def _ints(part: list[dict[Any, Any]], key: str) -> list[int]:
    """A field of every entry (0 where missing); TypeError for one that is not an int."""
    try:
        values = list(map(itemgetter(key), part))
    except KeyError:
        values = list(map(methodcaller("get", key, 0), part))
    if set(map(type, values)) != {int}:  # bool, float, str ... are entries of the wrong form
        raise TypeError(key)
    return values


def _entry_by_entry(trace: list[Any], interner: _Interner, rows: Rows) -> TraceColumns | None:
    """The streaming reader's rules, one item at a time: every dict's frames interned; a dict with an ``action``
    is an entry, or counted as one of the wrong form; an entry read before is not read again."""
    columns = ActionColumns()
    for item in trace:
        if type(item) is dict:
            if "action" not in item:
                interner.stack(item.get("frames"))
            elif interner.first_reading(item):
                columns.add(item, interner.stack(item.get("frames")), interner.folded, rows)
    return columns.finish()
