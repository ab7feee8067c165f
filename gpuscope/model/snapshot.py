"""A PyTorch CUDA memory snapshot (``torch.cuda.memory._dump_snapshot``) as columns.

The snapshot holds the allocator's segments and blocks when it was taken, and, per device, the trace of allocator
actions recorded since ``torch.cuda.memory._record_memory_history`` (each with its stack frames). Frames are
interned: ``frames`` holds each distinct one once and ``stacks`` each distinct call stack as frame ids, innermost
first (the snapshot's own order), so a snapshot of millions of actions holds each stack once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
U8 = npt.NDArray[np.uint8]
NO_STACK = -1
"""``stack_id`` of an action or block recorded without frames."""
OOMS_DESCRIBED = 20
"""Out-of-memory events a report describes per device (the first ones, each with what was live then); the rest are
counted."""


class Action(IntEnum):
    """The allocator's trace actions (``TraceEntry::Action`` in c10/cuda/CUDACachingAllocator.h)."""

    ALLOC = 0
    FREE_REQUESTED = 1
    FREE_COMPLETED = 2
    SEGMENT_ALLOC = 3
    SEGMENT_FREE = 4
    SEGMENT_MAP = 5
    SEGMENT_UNMAP = 6
    SNAPSHOT = 7
    OOM = 8


ACTION_NAMES = {a.name.lower(): a for a in Action}
"""The snapshot's action strings ("alloc", "free_requested" ...) to their codes."""


@dataclass(frozen=True)
class Frame:
    """One stack frame as the snapshot records it: a Python function, or a C++ one (``filename`` "??" or a .cpp
    file, ``line`` 0 where unknown)."""

    name: str
    filename: str
    line: int


@dataclass(frozen=True)
class Actions:
    """One device's allocator trace, in the order it was recorded."""

    action: U8
    """``Action`` codes."""
    addr: I64
    size_bytes: I64
    """As requested (the allocator rounds each block up: ``torch.cuda.max_memory_allocated`` counts the
    rounded sizes)."""
    time_us: I64
    """Epoch microseconds; 0 where the snapshot predates timestamps."""
    stack_id: I32
    stream: I64

    def __len__(self) -> int:
        return int(self.action.shape[0])

    @staticmethod
    def empty() -> Actions:
        z = np.zeros(0, np.int64)
        return Actions(np.zeros(0, np.uint8), z, z, z, np.zeros(0, np.int32), z)


@dataclass(frozen=True)
class Blocks:
    """The blocks of a device's segments when the snapshot was taken."""

    address: I64
    size_bytes: I64
    """The block's size, as the allocator rounded it."""
    requested_bytes: I64
    """What was asked for (``requested_size``): the unit of the trace's sizes."""
    allocated: npt.NDArray[np.bool_]
    """State "active_allocated"; a block pending free ("active_pending_free") no longer counts as allocated."""
    stack_id: I32

    @staticmethod
    def empty() -> Blocks:
        z = np.zeros(0, np.int64)
        return Blocks(z, z, z, np.zeros(0, bool), np.zeros(0, np.int32))


@dataclass(frozen=True)
class Segments:
    """A device's segments (memory reserved from the driver) when the snapshot was taken."""

    address: I64
    total_bytes: I64
    allocated_bytes: I64
    """Per segment, the bytes requested by its allocated blocks (``requested_size``, the unit of the trace's
    sizes; ``allocated_size`` counts them rounded up)."""
    expandable: npt.NDArray[np.bool_]

    @staticmethod
    def empty() -> Segments:
        z = np.zeros(0, np.int64)
        return Segments(z, z, z, np.zeros(0, bool))


@dataclass(frozen=True)
class Oom:
    """An ``oom`` action: an allocation the device could not hold."""

    index: int
    """Its position in the device's ``Actions``."""
    requested_bytes: int
    device_free_bytes: int | None
    """What the driver said was free then (``device_free``)."""


@dataclass(frozen=True)
class DeviceSnapshot:
    device: int
    actions: Actions
    segments: Segments
    blocks: Blocks
    ooms: tuple[Oom, ...] = ()


@dataclass(frozen=True)
class Annotation:
    """A ``record_function`` range the snapshot kept (``external_annotations``: "Optimizer.step#AdamW.step" ...)."""

    stage: str
    """"START" or "END"."""
    name: str
    device: int
    time_us: int


@dataclass(frozen=True)
class MemorySnapshot:
    source: str
    frames: tuple[Frame, ...]
    stacks: tuple[tuple[int, ...], ...]
    """Each distinct call stack as ids into ``frames``, innermost first."""
    devices: tuple[DeviceSnapshot, ...]
    expandable_segments: bool | None = None
    """The allocator's ``expandable_segments`` setting, where the snapshot says."""
    annotations: tuple[Annotation, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)
