"""What of a snapshot can be replayed: the devices that are GPUs, and the allocator actions, segments and blocks
whose sizes a GPU can hold. The rest is left out before the replay, counted and named in one line per device, so
that no peak, timeline or headroom is built from it and no sum overflows: a device -1 is the CPU or an unknown
device, not a GPU, and a size past ``model.memory.MAX_DEVICE_BYTES`` (1 PiB) is impossible.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from gpuscope.model.memory import MAX_DEVICE_BYTES
from gpuscope.model.snapshot import Actions, Blocks, DeviceSnapshot, MemorySnapshot, Oom, Segments

BOOL = npt.NDArray[np.bool_]
Table = TypeVar("Table", Actions, Segments, Blocks)


def sane_devices(snap: MemorySnapshot) -> tuple[list[DeviceSnapshot], list[str]]:
    """The snapshot's GPU devices with the impossible actions, segments and blocks left out, and one line for each
    device something was left out of."""
    kept: list[DeviceSnapshot] = []
    said: list[str] = []
    for dev in snap.devices:
        if dev.device < 0:
            said.append(f"device {dev.device} (not a GPU: the CPU or an unknown device) left out: "
                        f"{_counted(len(dev.actions), 'allocator action')}, "
                        f"{_counted(len(dev.segments.address), 'segment')}")
            continue
        clean, line = _sane(dev)
        kept.append(clean)
        if line:
            said.append(line)
    return kept, said


def _sane(dev: DeviceSnapshot) -> tuple[DeviceSnapshot, str | None]:
    actions_ok = _possible(dev.actions.size_bytes)
    segments_ok = _possible(dev.segments.total_bytes) & _possible(dev.segments.allocated_bytes)
    blocks_ok = _possible(dev.blocks.size_bytes) & _possible(dev.blocks.requested_bytes)
    if actions_ok.all() and segments_ok.all() and blocks_ok.all():
        return dev, None
    gone = [(~actions_ok, dev.actions.size_bytes, "allocator action"),
            (~segments_ok, dev.segments.total_bytes, "segment"), (~blocks_ok, dev.blocks.size_bytes, "block")]
    parts = [f"{_counted(int(bad.sum()), what)} (a size of {int(sizes[bad][0]):,} bytes)"
             for bad, sizes, what in gone if bad.any()]
    clean = replace(dev, actions=_rows(dev.actions, actions_ok), segments=_rows(dev.segments, segments_ok),
                    blocks=_rows(dev.blocks, blocks_ok), ooms=_ooms(dev.ooms, actions_ok))
    return clean, (f"device {dev.device}: left out {', '.join(parts)}: impossible sizes (no GPU holds more than "
                   f"{MAX_DEVICE_BYTES:,} bytes, or less than nothing)")


def _possible(sizes: npt.NDArray[np.int64]) -> BOOL:
    return np.asarray((sizes >= 0) & (sizes <= MAX_DEVICE_BYTES), dtype=bool)


def _rows(table: Table, keep: BOOL) -> Table:
    if keep.all():
        return table
    return replace(table, **{f.name: getattr(table, f.name)[keep] for f in fields(table)})


def _ooms(ooms: tuple[Oom, ...], keep: BOOL) -> tuple[Oom, ...]:
    """The out-of-memory events whose own action is kept, renumbered to the kept actions."""
    if keep.all():
        return ooms
    position = np.cumsum(keep) - 1
    return tuple(replace(o, index=int(position[o.index])) for o in ooms if 0 <= o.index < keep.size and keep[o.index])


def _counted(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"
