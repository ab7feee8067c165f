"""One device's allocations over a recording, whatever it was read from: the common form a snapshot's actions and
a trace's memory events are both replayed into.

Events are numbered in the order recorded (0..n-1); an allocation lives from the event that made it (``start``;
-1 when it was made before the recording began) to the event that freed it (``end``; n when it outlived the
recording). ``allocated_bytes[i]`` is the total after event i, so the allocations live after event i are those
with ``start <= i < end``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from gpuscope.model.memory import SourceFrame

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
U8 = npt.NDArray[np.uint8]
BEFORE = -1
"""``start`` of an allocation made before the recording began."""


class Phase(IntEnum):
    """Where in a training step an allocation was made, as its stack (or op) tells."""

    UNKNOWN = 0
    INIT = 1
    """Building or moving the model (module construction, ``.to()``, ``load_state_dict``)."""
    FORWARD = 2
    BACKWARD = 3
    GRADIENT = 4
    """Accumulating a parameter's gradient (``AccumulateGrad``)."""
    OPTIMIZER = 5
    BEFORE = 6
    """Made before the recording began: nothing says where."""


@dataclass(frozen=True)
class Site:
    """Where allocations were made: a stack (``frames``, innermost first) or an op; ``label`` reads in a line."""

    frames: tuple[SourceFrame, ...] | None
    op: str | None
    label: str


BEFORE_SITE = Site(frames=None, op=None, label="allocated before the recording began")


@dataclass(frozen=True)
class Allocations:
    """Columns, one row per allocation."""

    size_bytes: I64
    start: I64
    end: I64
    site: I32
    """Index into ``DeviceHistory.sites``."""
    phase: U8
    addr: I64
    """-1 where unknown."""

    def __len__(self) -> int:
        return int(self.size_bytes.shape[0])

    @staticmethod
    def empty() -> Allocations:
        z = np.zeros(0, np.int64)
        return Allocations(z, z, z, np.zeros(0, np.int32), np.zeros(0, np.uint8), z)

    def live_at(self, index: int) -> npt.NDArray[np.bool_]:
        return np.asarray((self.start <= index) & (index < self.end), dtype=bool)


@dataclass(frozen=True)
class OomAt:
    index: int
    requested_bytes: int
    device_free_bytes: int | None


@dataclass(frozen=True)
class DeviceHistory:
    device: int
    rank: int | None
    time_us: I64
    """Per event, epoch microseconds; 0 where the recording has no times, and on the recording's own clock where
    ``epoch_times`` is False (a trace that does not say when it was recorded)."""
    allocated_bytes: I64
    reserved_bytes: I64 | None
    absolute: bool
    start_allocated_bytes: int | None
    allocations: Allocations
    sites: tuple[Site, ...]
    alloc_events: I64
    """The events that made an allocation (ascending), and ``alloc_phase`` their phases: where phases begin."""
    alloc_phase: U8
    phase_ends_us: tuple[tuple[int, int], ...] = ()
    """Optimizer steps' (start, end) times where an annotation gives them."""
    largest_free_at_peak_bytes: int | None = None
    """The largest free range in the segments at the peak, where their layout is known (snapshots)."""
    ooms: tuple[OomAt, ...] = ()
    device_bytes: int | None = None
    device_bytes_source: str | None = None
    epoch_times: bool = True

    def __len__(self) -> int:
        return int(self.allocated_bytes.shape[0])

    def peak_index(self) -> int | None:
        """The event after which the most was allocated (the first such); None for an empty recording."""
        return int(np.argmax(self.allocated_bytes)) if len(self) else None


def pair_by_address(addr: I64, made: I64, freed: I64, n: int) -> tuple[I64, I64]:
    """Each allocation event's free (the next free of its address; n when none follows), in the order of
    ``made``, and the frees of addresses the recording never allocated (made before it began), ascending.
    ``made`` and ``freed`` are ascending event indices."""
    events = np.concatenate((made, freed))
    is_made = np.concatenate((np.ones(made.size, bool), np.zeros(freed.size, bool)))
    order = np.lexsort((events, addr[events]))
    ev, mk, at = events[order], is_made[order], addr[events[order]]
    same_as_next = np.r_[at[1:] == at[:-1], False]
    paired = mk & same_as_next & np.r_[~mk[1:], False]
    end = np.where(paired, np.r_[ev[1:], 0], n)
    made_pos = np.flatnonzero(mk)
    end_of_made = end[made_pos][np.argsort(ev[made_pos], kind="stable")]
    after_made = np.r_[False, mk[:-1] & (at[1:] == at[:-1])]
    return end_of_made.astype(np.int64), np.sort(ev[~mk & ~after_made]).astype(np.int64)
