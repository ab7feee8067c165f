"""The layout of a PyTorch memory snapshot, and its columns put together into ``MemorySnapshot``: what both readers
(``snapshot_fold`` after the C unpickler, ``snapshot_stream`` as the pickle streams by) share.

``torch.cuda.memory._dump_snapshot`` pickles a dict: ``segments`` (each with its ``blocks``), ``device_traces``
(per device, the allocator's actions, each with its stack ``frames``), ``allocator_settings`` and
``external_annotations``. Frames are interned in the order the pickle holds them and stacks as the unpickler
completes them (a block's before its segment's), so both readers number them alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuscope.model.snapshot import (
    ACTION_NAMES,
    OOMS_DESCRIBED,
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
from gpuscope.traces.limits import size_words
from gpuscope.traces.plain_data import BudgetSpent, NotPlainData

MAX_DEVICES = 64
"""Devices read from one snapshot (a process sees at most a node's GPUs); the rest are counted in a warning."""
UNKNOWN_ACTIONS_NAMED = 10
UNKNOWN_ACTIONS_KEPT = 1_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
ENTRY_FIELDS = ("addr", "size", "time_us", "stream")
"""A trace entry's integer fields, in the order ``Actions`` takes them after the action (0 where missing)."""
FLUSH_ROWS = 4_096
TEXT_CHARS = 4_096
"""A frame's name or file, an annotation's name: past this many characters, cut (C++ frames run to a few hundred)."""


def is_int64(value: Any) -> bool:
    return type(value) is int and INT64_MIN <= value <= INT64_MAX


def clean(text: str) -> str:
    """``text`` as UTF-8 can hold it, at most ``TEXT_CHARS`` characters: a lone surrogate (which a pickle's strings
    may hold) becomes U+FFFD."""
    if len(text) > TEXT_CHARS:
        text = text[:TEXT_CHARS - 1] + "…"
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def frame_key(item: dict[Any, Any]) -> tuple[str, str, int] | None:
    """A stack frame's (name, filename, line), or None for a dict that is not one."""
    if "filename" in item and "line" in item and "name" in item and len(item) <= 4:
        name, filename, line = item["name"], item["filename"], item["line"]
        if isinstance(name, str) and isinstance(filename, str) and is_int64(line):
            return clean(name), clean(filename), line
    return None


def not_a_snapshot(words: str) -> NotPlainData:
    """Plain data, but not a memory snapshot."""
    return NotPlainData(words, refused=False)




class Rows:
    """The row budget (``PickleBudget.rows``): allocator actions, segments and blocks together."""

    def __init__(self, limit: int, size_bytes: int) -> None:
        self.limit = limit
        self.size_bytes = size_bytes
        self.count = 0

    def add(self, n: int) -> None:
        self.count += n
        if self.count > self.limit:
            raise BudgetSpent(f"more than {self.limit:,} rows (allocator actions, segments and blocks) in "
                              f"{size_words(self.size_bytes)} of pickle: past the reader's limit of one row per 16 "
                              "bytes (a reference repeated many times?)")


@dataclass
class TraceColumns:
    actions: Actions
    ooms: list[tuple[int, int, int | None]]
    """(index into ``actions``, bytes requested, ``device_free`` where an int64)."""


@dataclass
class Folded:
    """What a reader found besides the document's tree: trace columns by position in ``device_traces``, the
    interned frames and stacks (in id order), and what it left out."""

    traces: dict[int, TraceColumns] = field(default_factory=dict)
    frames: list[tuple[str, str, int]] = field(default_factory=list)
    stacks: list[tuple[int, ...]] = field(default_factory=list)
    bad_entries: int = 0
    unknown_actions: set[str] = field(default_factory=set)
    unread_devices: set[int] = field(default_factory=set)
    """Devices with a trace left unread: past the ``MAX_DEVICES`` read."""

    def unknown(self, action: Any) -> None:
        if len(self.unknown_actions) < UNKNOWN_ACTIONS_KEPT:
            self.unknown_actions.add(clean(action[:40]) if isinstance(action, str) else f"({type(action).__name__})")


class ActionColumns:
    """One device's trace entries, one at a time: a short list of rows, turned into typed column arrays every
    ``FLUSH_ROWS`` entries so that what is held per entry is its ``ACTION_BYTES``."""

    _DTYPES = (np.uint8, np.int64, np.int64, np.int64, np.int32, np.int64)

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int, int, int]] = []
        self.parts: list[list[np.ndarray[Any, Any]]] = [[] for _ in self._DTYPES]
        self.ooms: list[tuple[int, int, int | None]] = []
        self.count = 0

    def add(self, item: dict[Any, Any], stack: int, folded: Folded, rows: Rows) -> None:
        """A trace entry (a dict with an ``action``); one of the wrong form is counted in ``folded``."""
        action = ACTION_NAMES.get(item["action"]) if isinstance(item["action"], str) else None
        if action is None:
            folded.unknown(item["action"])
            return
        values = [item.get(k, 0) for k in ENTRY_FIELDS]
        if not all(is_int64(v) for v in values) or values[1] < 0:
            folded.bad_entries += 1
            return
        rows.add(1)
        if action == Action.OOM:
            free = item.get("device_free")
            self.ooms.append((self.count, values[1], free if is_int64(free) else None))
        self.rows.append((int(action), values[0], values[1], values[2], stack, values[3]))
        self.count += 1
        if len(self.rows) >= FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            for column, values, dtype in zip(self.parts, zip(*self.rows), self._DTYPES):
                column.append(np.fromiter(values, dtype=dtype, count=len(self.rows)))
            self.rows = []

    def finish(self) -> TraceColumns | None:
        """The columns; None when no entry was read."""
        self._flush()
        if not self.count:
            return None
        columns = []
        for i, dtype in enumerate(self._DTYPES):  # one column at a time: the copy made here is one column's
            parts, self.parts[i] = self.parts[i], []
            columns.append(np.concatenate(parts) if len(parts) > 1 else parts[0].astype(dtype, copy=False))
        return TraceColumns(Actions(action=columns[0], addr=columns[1], size_bytes=columns[2], time_us=columns[3],
                                    stack_id=columns[4], stream=columns[5]), self.ooms)


def assemble(source: str, top: Any, folded: Folded, stack_id: Callable[[Any], int], rows: Rows) -> MemorySnapshot:
    """The snapshot from the document's ``top`` (its trace entries already folded) and what the reader found;
    ``stack_id`` gives a block's ``frames`` value its stack id."""
    if isinstance(top, list) and all(isinstance(s, dict) for s in top):  # ``memory_snapshot()``: segments alone
        top = {"segments": top}
    if not isinstance(top, dict) or not isinstance(top.get("segments"), list):
        raise not_a_snapshot("not a PyTorch memory snapshot (no segments; written by "
                             "torch.cuda.memory._dump_snapshot?)")
    traces = top.get("device_traces")
    seg_rows, block_rows = _segment_rows(top["segments"], stack_id, rows)
    devices = sorted(set(folded.traces) | set(seg_rows) | folded.unread_devices)
    warnings = _warnings(folded, isinstance(traces, list) and len(traces) > 0)
    warnings += [f"GPU {d}: {len(folded.traces[d].ooms):,} out-of-memory events, the first {OOMS_DESCRIBED} described"
                 for d in devices[:MAX_DEVICES] if d in folded.traces and len(folded.traces[d].ooms) > OOMS_DESCRIBED]
    if len(devices) > MAX_DEVICES:
        warnings.append(f"{len(devices):,} devices: the first {MAX_DEVICES} by index are read, "
                        f"{len(devices) - MAX_DEVICES:,} left out")
        devices = devices[:MAX_DEVICES]
    empty = TraceColumns(Actions.empty(), [])
    return MemorySnapshot(
        source=source, frames=tuple(Frame(*f) for f in folded.frames), stacks=tuple(folded.stacks),
        devices=tuple(DeviceSnapshot(
            device=d, actions=folded.traces.get(d, empty).actions, segments=_segments(seg_rows.get(d, [])),
            blocks=_blocks(block_rows.get(d, [])),
            ooms=tuple(Oom(index=i, requested_bytes=size, device_free_bytes=free)
                       for i, size, free in folded.traces.get(d, empty).ooms)) for d in devices),
        expandable_segments=_expandable(top.get("allocator_settings")), annotations=_annotations(top),
        warnings=tuple(warnings))


def segment_devices(top: Any) -> set[int]:
    """The devices the snapshot's segments name."""
    raw = top.get("segments") if isinstance(top, dict) else top
    return {s["device"] for s in raw if isinstance(s, dict) and ints(s, "device", "address", "total_size")} \
        if isinstance(raw, list) else set()


def _warnings(folded: Folded, traced: bool) -> list[str]:
    out = []
    if folded.bad_entries:
        out.append(f"{folded.bad_entries} trace entries with a field of the wrong type were left out")
    if folded.unknown_actions:
        names = sorted(folded.unknown_actions)
        more = len(names) - UNKNOWN_ACTIONS_NAMED
        out.append("trace entries of unknown actions were left out: " + ", ".join(names[:UNKNOWN_ACTIONS_NAMED])
                   + (f" and {more:,} more" if more > 0 else ""))
    if not traced:
        out.append("no allocator trace: the snapshot was taken without _record_memory_history, so only its "
                   "end state is known")
    return out


_SegmentRow = tuple[int, int, int, bool]
_BlockRow = tuple[int, int, int, bool, int]


def _segment_rows(raw: list[Any], stack_id: Callable[[Any], int], rows: Rows
                  ) -> tuple[dict[int, list[_SegmentRow]], dict[int, list[_BlockRow]]]:
    seg_rows: dict[int, list[_SegmentRow]] = {}
    block_rows: dict[int, list[_BlockRow]] = {}
    for seg in raw:
        if not isinstance(seg, dict) or not ints(seg, "device", "address", "total_size"):
            continue
        device = seg["device"]
        found = seg.get("blocks")
        blocks: list[Any] = found if isinstance(found, list) else []
        rows.add(1 + len(blocks))
        address = seg["address"]
        requested = 0
        for block in blocks:
            if not isinstance(block, dict) or not ints(block, "size"):
                continue
            at = block["address"] if ints(block, "address") else address  # older snapshots: blocks in order
            asked = block["requested_size"] if ints(block, "requested_size") else block["size"]
            is_allocated = block.get("state") == "active_allocated"
            requested += asked if is_allocated else 0
            block_rows.setdefault(device, []).append(
                (at, block["size"], asked, is_allocated, stack_id(block.get("frames"))))
            address = at + block["size"]
        seg_rows.setdefault(device, []).append((seg["address"], seg["total_size"], requested,
                                                seg.get("is_expandable") is True))
    return seg_rows, block_rows


def _segments(found: list[_SegmentRow]) -> Segments:
    if not found:
        return Segments.empty()
    return Segments(address=np.array([r[0] for r in found], np.int64),
                    total_bytes=np.array([r[1] for r in found], np.int64),
                    allocated_bytes=np.array([r[2] for r in found], np.int64),
                    expandable=np.array([r[3] for r in found], bool))


def _blocks(found: list[_BlockRow]) -> Blocks:
    if not found:
        return Blocks.empty()
    return Blocks(address=np.array([r[0] for r in found], np.int64),
                  size_bytes=np.array([r[1] for r in found], np.int64),
                  requested_bytes=np.array([r[2] for r in found], np.int64),
                  allocated=np.array([r[3] for r in found], bool),
                  stack_id=np.array([r[4] for r in found], np.int32))


def ints(d: dict[Any, Any], *keys: str) -> bool:
    """The keys hold integers a column can hold (int64, sizes not negative)."""
    return all(type(v := d.get(k)) is int and INT64_MIN <= v <= INT64_MAX and (v >= 0 or "size" not in k)
               for k in keys)


def _expandable(settings: Any) -> bool | None:
    if isinstance(settings, dict) and isinstance(settings.get("expandable_segments"), bool):
        return bool(settings["expandable_segments"])
    return None


def _annotations(top: dict[Any, Any]) -> tuple[Annotation, ...]:
    raw = top.get("external_annotations")
    if not isinstance(raw, list):
        return ()
    return tuple(Annotation(stage=clean(a["stage"]), name=clean(a["name"]),
                            device=a["device"] if is_int64(a.get("device")) else 0, time_us=a["time_us"])
                 for a in raw if isinstance(a, dict) and isinstance(a.get("stage"), str)
                 and isinstance(a.get("name"), str) and is_int64(a.get("time_us")))
