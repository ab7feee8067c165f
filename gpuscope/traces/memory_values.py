"""GPU memory events that cannot be what they say, left out as a trace is read and named in one line, so that no
peak, timeline or headroom is built from them: an event of a GPU device type whose device id is negative (-1: the
CPU, or a device the profiler did not know; not a GPU), and one whose size or allocator totals are negative (other
than the -1 that stands for "not recorded") or more than any GPU holds (``model.memory.MAX_DEVICE_BYTES``)."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import numpy.typing as npt

from gpuscope.model.memory import MAX_DEVICE_BYTES
from gpuscope.model.trace import MemoryEvents

_FIELDS = (("bytes", "Bytes", True), ("total_allocated_bytes", "Total Allocated", False),
           ("total_reserved_bytes", "Total Reserved", False))
"""The column, the trace's name for it, and whether it may be negative (a free's Bytes is)."""


def refuse_impossible_memory(memory: MemoryEvents) -> tuple[MemoryEvents, str | None]:
    """``memory`` less the GPU memory events that cannot be, and the line that counts and names them (None when
    there are none)."""
    gpu = memory.on_gpu()
    no_device = gpu & (memory.device_id < 0)
    impossible: dict[str, npt.NDArray[np.bool_]] = {}
    for column, label, signed in _FIELDS:
        values = getattr(memory, column)
        low = -MAX_DEVICE_BYTES if signed else -1
        impossible[label] = gpu & ((values < low) | (values > MAX_DEVICE_BYTES))
    bad = no_device | np.logical_or.reduce(list(impossible.values()))
    if not bad.any():
        return memory, None
    parts = []
    if no_device.any():
        ids = sorted(set(memory.device_id[no_device].tolist()))
        parts.append(f"{int(no_device.sum()):,} of device {', '.join(map(str, ids[:3]))} (not a GPU: the CPU or an "
                     "unknown device)")
    for column, label, _ in _FIELDS:
        hit = impossible[label] & ~no_device
        if hit.any():
            first = int(getattr(memory, column)[hit][0])
            parts.append(f"{int(hit.sum()):,} with an impossible {label} ({first:,} bytes; no GPU holds more than "
                         f"{MAX_DEVICE_BYTES:,} or less than nothing)")
    keep = ~bad
    kept = replace(memory, **{f.name: getattr(memory, f.name)[keep] for f in fields(memory)})
    return kept, f"{int(bad.sum()):,} GPU memory events left out: {'; '.join(parts)}"
