"""What filled a GPU's memory at its peak, and how much room is left (``gpuscope memory PATH``, schema
``gpuscope.memory/1``).

Bytes are the allocator's (block sizes, as ``torch.cuda.max_memory_allocated`` counts them); times are epoch
microseconds; shares are fractions 0..1; a value that cannot be known is None (JSON null), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MEMORY_SCHEMA = "gpuscope.memory/1"
MAX_DEVICE_BYTES = 2**50
"""1 PiB: no GPU holds more (the largest hold a few hundred GB), so a size or total past it, in a trace's memory
events or a snapshot, is impossible: named and left out, never summed (a few such values would overflow int64)."""

Category = Literal["parameters", "gradients", "optimizer_state", "activations", "temporaries", "unknown"]
CATEGORIES: tuple[Category, ...] = ("parameters", "gradients", "optimizer_state", "activations", "temporaries",
                                    "unknown")
"""What an allocation holds, as far as the stack it was made in (or the op, in a trace) and its lifetime tell."""
SourceKind = Literal["snapshot", "trace"]


@dataclass(frozen=True)
class SourceFrame:
    """A frame of the stack an allocation was made in (innermost first): a Python function, or a C++ one where no
    Python frame was recorded (its ``filename`` "??" or a .cpp file, ``line`` 0 where unknown)."""

    name: str
    filename: str
    line: int


@dataclass(frozen=True)
class PeakGroup:
    """The allocations live at the peak that were made in one place: one stack (``frames``, from a snapshot) or,
    in a trace, one op (``op``, with the Python frames around it where the trace recorded them); None where
    unknown."""

    frames: tuple[SourceFrame, ...] | None
    op: str | None
    bytes: int
    count: int
    category: Category
    """The category most of its bytes fall in."""
    label: str = ""
    """How the place reads in a line: the innermost frame of the user's code ("forward (model.py:54)"), the op, or
    "allocated before the recording began"."""


@dataclass(frozen=True)
class CategoryShare:
    category: Category
    bytes: int
    share: float
    """Of the bytes allocated at the peak."""


@dataclass(frozen=True)
class Timeline:
    """Allocated (and reserved, where known) bytes over time, downsampled to each bucket's extremes so the peak is
    always kept."""

    time_us: tuple[int, ...]
    allocated_bytes: tuple[int, ...]
    reserved_bytes: tuple[int, ...] | None
    points_recorded: int
    """How many allocator events the full timeline had."""


@dataclass(frozen=True)
class Fragmentation:
    """Memory the allocator held but had not handed out, at the peak."""

    reserved_unallocated_bytes: int | None
    share_of_reserved: float | None
    largest_free_block_bytes: int | None
    """The largest contiguous free range in any segment at the peak: the biggest allocation that would have fit
    without reserving more."""


@dataclass(frozen=True)
class OomEvent:
    """An allocation the device could not hold (an ``oom`` action), with what was live then."""

    time_us: int | None
    requested_bytes: int
    device_free_bytes: int | None
    allocated_bytes: int | None
    """Bytes allocated when it happened."""
    live: tuple[PeakGroup, ...]
    """What was live then, grouped as at the peak, largest first."""


@dataclass(frozen=True)
class MemoryAdvice:
    """A change to make, with the bytes it frees and what that buys."""

    code: str
    """Stable: headroom, larger_batch, activation_checkpointing, expandable_segments, optimizer_sharding,
    eight_bit_optimizer, smaller_gpu."""
    title: str
    detail: str
    frees_bytes: int | None
    """Bytes it frees at the peak (an estimate where the detail says so)."""
    batch_multiplier: float | None
    """The largest batch that would fit after it, as a multiple of the current one (an estimate)."""
    est_saving_fraction: float | None
    """Share of GPU-hours it would save (negative: what it costs), with the reasoning in ``basis``."""
    est_saving_usd: float | None
    basis: str
    """How the saving was estimated, and what is missing where it is None."""


@dataclass(frozen=True)
class DeviceMemory:
    """One device's memory over the recording."""

    device: int
    rank: int | None
    peak_allocated_bytes: int | None
    peak_time_us: int | None
    absolute: bool
    """True: allocated bytes are the device's whole; False: relative to the trace's start (a running sum of the
    allocations the trace saw), a lower bound of the peak."""
    peak_reserved_bytes: int | None
    """The most the allocator held over the recording."""
    reserved_at_peak_bytes: int | None
    device_bytes: int | None
    device_bytes_source: str | None
    headroom_bytes: int | None
    """``device_bytes`` minus the most reserved (or allocated, where reserved is unknown)."""
    start_allocated_bytes: int | None
    """Live when the recording began (a snapshot: what its segments hold at the end minus the trace's net
    allocations)."""
    at_peak: tuple[PeakGroup, ...]
    makeup: tuple[CategoryShare, ...]
    timeline: Timeline
    fragmentation: Fragmentation
    oom: tuple[OomEvent, ...] = ()
    advice: tuple[MemoryAdvice, ...] = ()


@dataclass(frozen=True)
class ReadStats:
    """What was read, and what reading it held in memory."""

    actions: int
    """Allocator actions (snapshot) or memory events (trace) read."""
    distinct_frames: int
    distinct_stacks: int
    file_bytes: int | None


@dataclass(frozen=True, kw_only=True)
class MemoryReport:
    """``gpuscope memory PATH --json``."""

    schema: str = MEMORY_SCHEMA
    source: str
    kind: SourceKind
    run_id: str | None = None
    devices: tuple[DeviceMemory, ...]
    expandable_segments: bool | None = None
    usd_per_gpu_hour: float | None = None
    price_source: str | None = None
    job_hours: float | None = None
    read: ReadStats | None = None
    warnings: tuple[str, ...] = ()
