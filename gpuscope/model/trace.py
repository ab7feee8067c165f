"""The columnar form of one rank's profiler trace.

Events are kept as parallel numpy arrays with an interned name table, the way
Holistic Trace Analysis keeps its symbol table, so a rank with millions of events
costs a few bytes an event and every analysis is a vectorised pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from gpuscope.model.gpu import GpuInfo


class Kind(IntEnum):
    """What an event is, whatever its Kineto schema era called it."""

    OTHER = 0
    KERNEL = 1
    MEMCPY = 2
    MEMSET = 3
    RUNTIME = 4  # cudaLaunchKernel, hipMemcpyAsync, cuda driver calls ...
    CPU_OP = 5  # aten ops ("cpu_op", old "Operator")
    USER_ANNOTATION = 6  # record_function ranges, ProfilerStep#N in newer traces
    PYTHON = 7  # python_function
    GPU_ANNOTATION = 8  # gpu_user_annotation
    STEP = 9  # ProfilerStep#N, whatever category it came in


class Precision(IntEnum):
    """The lowest-precision floating type among a host op's inputs (Kineto's ``Input type``, with
    ``record_shapes``); UNKNOWN for other events and for traces without input types."""

    UNKNOWN = 0
    FP32 = 1
    HALF = 2  # fp16 or bf16: what runs stored before the two were told apart hold; the reader writes FP16 or BF16
    FP8 = 3
    INT8 = 4  # int8 inputs and no floating ones
    FP64 = 5
    OTHER = 6  # only tensors of other types (int64, bool, complex)
    BF16 = 7
    FP16 = 8


EPOCH_MIN_NS = 946_684_800 * 10**9
"""2000-01-01: a trace time past it is since the epoch already (older PyTorch wrote absolute ``ts``); one before it
counts from the trace's base time, or from a clock the file does not name."""
TS_MIN_NS = -(2**61)
TS_MAX_NS = 2**62
"""The range of an event's time, in ns (as epoch times, 1896 to 2116; Kineto writes epoch or boot-relative µs), so
a time, a time plus a duration, and the span from the first event to the last all fit in int64."""
DUR_MAX_NS = 7 * 24 * 3600 * 10**9
"""The longest event: 7 days. Kineto traces span seconds to minutes; a longer duration is a corrupt field."""

GPU_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
CPU_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)
GPU_DEVICE_TYPES = (1, 6, 12, 13)
"""The c10 device types of GPU memory in ``[memory]`` events: CUDA 1, HIP 6 (ROCm builds write either), XPU 12,
MPS 13 (c10/core/DeviceType.h)."""

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
U8 = npt.NDArray[np.uint8]
_Arrays = TypeVar("_Arrays")
F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Events:
    """Complete ("X") events of one rank, sorted by start time.

    Times are int64 nanoseconds since the epoch (Kineto's µs times x 1000, exact;
    ``displayTimeUnit: ns`` traces keep their fractional µs).
    ``stream`` is -1 for host events; ``correlation`` and ``external_id`` are -1 when absent.
    ``blocks_per_sm`` and ``warps_per_sm`` are NaN where the trace does not give them.
    ``precision`` holds ``Precision`` values; left out (empty), it is UNKNOWN for every event.
    """

    ts_ns: I64
    dur_ns: I64
    kind: U8
    name_id: I32
    tid: I64
    stream: I32
    device: I32
    correlation: I64
    external_id: I64
    bytes: I64
    blocks_per_sm: F32
    warps_per_sm: F32
    precision: U8 = field(default_factory=lambda: np.zeros(0, dtype=np.uint8))
    shape_id: I32 = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    """Host ops recorded with ``record_shapes``: the index of their inputs' shapes in ``RankTrace.shapes``; -1 for
    other events. Left out (empty), -1 for every event."""
    sequence: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """A host op's autograd ``Sequence number`` (recorded while grad mode is on: the op builds a graph node, and the
    backward call of that node carries the same number); -1 where not recorded. Left out (empty), -1 for every
    event. It tells a forward op re-run for a checkpointed activation from a backward's own ops
    (``analyzers.efficiency.recompute``)."""
    _memo: dict[tuple[object, ...], Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Masks by kind, the distinct names under them and what ``remembered`` keeps, computed once: every analysis
    of a rank asks for the same few (read-only, so no caller can change another's)."""

    def __post_init__(self) -> None:
        if self.precision.size == 0 and self.ts_ns.size:
            object.__setattr__(self, "precision", np.zeros(self.ts_ns.size, dtype=np.uint8))
        if self.shape_id.size == 0 and self.ts_ns.size:
            object.__setattr__(self, "shape_id", np.full(self.ts_ns.size, -1, dtype=np.int32))
        if self.sequence.size == 0 and self.ts_ns.size:
            object.__setattr__(self, "sequence", np.full(self.ts_ns.size, -1, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])

    @property
    def end_ns(self) -> I64:
        return self.ts_ns + self.dur_ns

    def mask(self, *kinds: Kind) -> npt.NDArray[np.bool_]:
        """Events of any of ``kinds`` (a read-only array)."""
        hit = self._memo.get(kinds)
        if hit is None:
            wanted = np.zeros(256, dtype=bool)  # a lookup by kind: one gather, where isin would sort
            wanted[np.asarray(kinds, dtype=np.uint8)] = True
            hit = self._remember(kinds, wanted[self.kind])
        return hit

    def name_ids(self, *kinds: Kind) -> npt.NDArray[np.intp]:
        """The distinct name ids events of ``kinds`` carry, ascending (a read-only array)."""
        key = ("names", *kinds)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._remember(key, np.flatnonzero(np.bincount(self.name_id[self.mask(*kinds)])))
        return hit

    def remembered(self, key: str, compute: Callable[[], _Arrays]) -> _Arrays:
        """``compute()``, a function of these events alone (an array, or a tuple of arrays), computed once: several
        analyses of a rank derive the same thing from its events (the launch pairs, the queued time). The arrays
        are made read-only."""
        hit = self._memo.get((key,))
        if hit is None:
            hit = value = compute()
            for array in (value,) if isinstance(value, np.ndarray) else cast(tuple[npt.NDArray[Any], ...], value):
                array.flags.writeable = False
            self._memo[(key,)] = hit
        return cast(_Arrays, hit)

    def _remember(self, key: tuple[object, ...], value: npt.NDArray[Any]) -> npt.NDArray[Any]:
        value.flags.writeable = False
        self._memo[key] = value
        return value


@dataclass(frozen=True)
class OpShape:
    """A host op's inputs as recorded with ``record_shapes=True``: one entry per input, in order."""

    dims: str
    """Kineto's ``Input Dims`` as JSON text, e.g. "[[32, 3, 224, 224], [64, 3, 7, 7], [], []]"."""
    types: tuple[str, ...] = ()
    """``Input type``, e.g. ("float", "float", "GenericList", "Int")."""
    concrete: str = ""
    """``Concrete Inputs`` as JSON text (newer traces: the scalars and lists, e.g. "['', '', '[2, 2]', '1']");
    empty where the trace has none."""


@dataclass(frozen=True)
class MemoryEvents:
    """``[memory]`` instant events: allocator activity, in time order.

    ``device_type`` follows c10: 0 CPU, 1 CUDA, 6 HIP (ROCm builds report 1 or 6; ``GPU_DEVICE_TYPES`` lists the
    GPU ones); ``total_allocated_bytes`` is -1 where the trace predates that field.
    """

    ts_ns: I64
    bytes: I64
    total_allocated_bytes: I64
    device_type: I32
    device_id: I32
    addr: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The block's address ("Addr"), which pairs an allocation with its free; -1 where the event has none. Left out
    (empty), -1 for every event."""
    total_reserved_bytes: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The allocator's reserved total after the event ("Total Reserved"); -1 where the trace predates it."""
    tid: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The thread the allocation was made on (the thread of the op it was made in); -1 where not a number."""

    def __post_init__(self) -> None:
        n = len(self.ts_ns)
        for name in ("addr", "total_reserved_bytes", "tid"):
            if getattr(self, name).size != n:
                object.__setattr__(self, name, np.full(n, -1, dtype=np.int64))

    def on_gpu(self) -> npt.NDArray[np.bool_]:
        """Which events are a GPU's memory: those of the device types ``GPU_DEVICE_TYPES`` names (CUDA, HIP, XPU,
        MPS). The one rule every reader of memory events goes by."""
        return np.isin(self.device_type, GPU_DEVICE_TYPES)


@dataclass(frozen=True)
class CollectiveOps:
    """Host collective ops that recorded their message (torch's ``record_param_comms`` and ``nccl:*`` ops with
    the comms args of PyTorch 2.x: "Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size").
    One row per op, in time order; ``external_id`` joins an op to the kernel it launched."""

    ts_ns: I64
    dur_ns: I64
    external_id: I64
    in_nelems: I64
    out_nelems: I64
    group_size: I64
    op: tuple[str, ...]
    dtype: tuple[str, ...]
    group: tuple[str, ...] = ()
    """The process group's name ("Process Group Name", newer PyTorch); "" where the op does not say. Left out
    (empty), "" for every op."""
    seq: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """The op's sequence number in its process group ("Seq"); -1 where the op does not say. Left out (empty), -1
    for every op."""

    def __post_init__(self) -> None:
        n = len(self.ts_ns)
        if len(self.group) != n:
            object.__setattr__(self, "group", ("",) * n)
        if self.seq.size != n:
            object.__setattr__(self, "seq", np.full(n, -1, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])

    @staticmethod
    def empty() -> CollectiveOps:
        z = np.zeros(0, np.int64)
        return CollectiveOps(z, z, z, z, z, z, (), ())


@dataclass(frozen=True)
class DroppedEvent:
    """A GPU event the reader refused because it cannot have happened (``gpuscope.traces.impossible``): what it
    was, and the rule it broke. It is in no figure."""

    name: str
    kind: str
    """"kernel", "memcpy" or "memset"."""
    duration_ns: int
    device: int
    stream: int
    why: str
    """The rule it broke, in words with its numbers ("it runs 6.0 days past the host's last call, ...")."""


def dropped_line(rank: int, source: str, dropped: tuple[DroppedEvent, ...], *, named: int = 3) -> str:
    """The warning that names a rank's dropped events (the ``named`` longest, and how many more)."""
    longest = sorted(dropped, key=lambda d: -d.duration_ns)
    parts = [f'{d.kind} "{_short(d.name)}" of {duration_words(d.duration_ns)} on GPU {d.device} stream {d.stream}'
             f" ({d.why})" for d in longest[:named]]
    more = f"; and {len(dropped) - named} more" if len(dropped) > named else ""
    count = f"{len(dropped)} impossible GPU event{'s' if len(dropped) != 1 else ''}"
    return f"rank {rank} ({source}): dropped {count}, left out of every figure: {'; '.join(parts)}{more}"


def reader_lines(traces: Sequence[RankTrace]) -> tuple[str, ...]:
    """What the reader said of each trace: the fields it left out and the impossible events it dropped (for
    traces loaded from the store, whose first reading said so already)."""
    return tuple(line for t in traces for line in (
        *t.warnings, *((dropped_line(t.rank, t.source, t.dropped),) if t.dropped else ())))


def duration_words(ns: float) -> str:
    """A duration in the unit that reads best, from µs to days ("6.0 days", "1.07 s", "350 µs")."""
    for unit, size in (("days", 86_400e9), ("h", 3_600e9), ("min", 60e9)):
        if ns >= size:
            return f"{ns / size:.1f} {unit}"
    if ns >= 1e9:
        return f"{ns / 1e9:.3g} s"
    return f"{ns / 1e6:.3g} ms" if ns >= 1e6 else f"{ns / 1e3:.3g} µs"


def _short(name: str, width: int = 80) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


@dataclass(frozen=True)
class RankTrace:
    """One rank's trace: its events, memory events, names and what the file said of itself."""

    rank: int
    source: str
    """The file it was read from."""
    events: Events
    memory: MemoryEvents
    names: tuple[str, ...]
    """Interned event names; ``events.name_id`` indexes it."""
    gpus: tuple[GpuInfo, ...] = ()
    world_size: int | None = None
    backend: str | None = None
    attrs: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    """The process that recorded the trace (the pid of its host events), None when it has none."""
    collectives: CollectiveOps = field(default_factory=CollectiveOps.empty)
    rank_given: bool = False
    """True when the file's distributedInfo gave ``rank``; else it came from the file name, or is 0."""
    warnings: tuple[str, ...] = ()
    """What the reader left out of the file, one line each (fields of the wrong type ...)."""
    base_time_ns: int | None = None
    """Kineto's ``baseTimeNanoseconds``: the epoch time the events' ``ts`` count from (newer PyTorch writes
    ``ts`` relative to it); None when the file does not say."""
    content_sha256: str = ""
    """SHA-256 (hex) of the file's JSON text as read (after gunzip): with the file's name, what tells this trace
    analysed again from another one. Empty for a columnar copy from the store."""
    shapes: tuple[OpShape, ...] = ()
    """Interned input shapes of host ops; ``events.shape_id`` indexes it."""
    host_name: str | None = None
    """The machine that recorded it (Kineto's ``host_name``), None when the file does not say: ranks of one host
    share its clock."""
    dropped: tuple[DroppedEvent, ...] = ()
    """GPU events the reader refused as impossible (not in ``events``); ``dropped_line`` names them."""
    step_range: str | None = None
    """The name of the range that marks a step, as the user gave it (``--step-range NAME``): the ranges named so,
    or whose name begins with it, are the steps (``analyzers.trace.steps``). None: ProfilerStep, else a serving
    engine's step ranges."""

    @cached_property
    def epoch_offset_ns(self) -> int | None:
        """What makes the trace's times (events' and memory events') epoch times: Kineto's ``baseTimeNanoseconds``
        (newer PyTorch writes ``ts`` relative to it), 0 where the times are since the epoch already (older PyTorch),
        None where the file does not say when it was recorded."""
        first = (int(self.events.ts_ns.min()) if len(self.events) else
                 int(self.memory.ts_ns.min()) if len(self.memory.ts_ns) else 0)
        if first >= EPOCH_MIN_NS:  # counted from a base time, it would be 30 years past it: epoch times already
            return 0
        if self.base_time_ns is not None and self.base_time_ns + first >= EPOCH_MIN_NS:
            return self.base_time_ns
        return None

    @cached_property
    def main_device(self) -> int | None:
        """The device index most of the rank's GPU events ran on; None for a trace without GPU events."""
        devices = self.events.device[self.events.device >= 0]
        if not devices.size:
            return None
        # Counted by distinct id, not bincount: a device id of 2**31 - 1 (a damaged field) would cost 16 GiB.
        ids, counts = np.unique(devices, return_counts=True)
        return int(ids[counts.argmax()])  # the lowest id among the most used, as bincount's argmax gives

    @cached_property
    def gpu_active(self) -> bool:
        """Whether the trace records any GPU activity: a kernel, copy or set, a CUDA/HIP runtime call, or GPU memory
        allocated. A trace without any is a CPU process's, whatever ``deviceProperties`` lists."""
        ev = self.events
        return bool(ev.mask(*GPU_KINDS, Kind.RUNTIME).any()
                    or self.memory.on_gpu().any())

    def main_gpu(self) -> GpuInfo | None:
        """The deviceProperties entry of ``main_device`` (the first one listed when there are no GPU events)."""
        index = self.main_device
        return next((g for g in self.gpus if index is None or g.index == index), None)

    def name_mask(self, predicate: Callable[[str], bool], *kinds: Kind) -> npt.NDArray[np.bool_]:
        """Events (of ``kinds``, when given) whose interned name satisfies ``predicate``.

        The predicate runs once per distinct name, and only on names events of ``kinds`` carry: a host-op
        rule never scans the kilobyte-long template names of kernels.
        """
        ev = self.events
        selected = ev.mask(*kinds) if kinds else None
        ids = ev.name_ids(*kinds) if selected is not None else np.arange(len(self.names))
        table = np.zeros(len(self.names), dtype=bool)
        table[ids] = [predicate(self.names[i]) for i in ids.tolist()]
        hits = table[ev.name_id]
        return hits & selected if selected is not None else hits



def source_of(trace: RankTrace) -> str:
    """What an error line names a rank by: the file it was read from."""
    return trace.source


@dataclass(frozen=True)
class RankFile:
    """What a rank file said of itself, kept once its events are reduced: who wrote it (rank, process), where its
    events start, and what the reader left out. Profiler-cycle selection and rank numbering read nothing else."""

    source: str
    """The file (a path or a URL) it was read from."""
    rank: int
    rank_given: bool = False
    pid: int | None = None
    start_ns: int = -1
    """The first event's start; -1 for a file without events."""
    main_device: int | None = None
    """``RankTrace.main_device``: the GPU most of its work ran on."""
    warnings: tuple[str, ...] = ()
    dropped: tuple[DroppedEvent, ...] = ()
    """``RankTrace.dropped``: named in a warning once the file's rank number is settled."""

    @staticmethod
    def of(trace: RankTrace) -> RankFile:
        return RankFile(source=trace.source, rank=trace.rank, rank_given=trace.rank_given, pid=trace.pid,
                        start_ns=int(trace.events.ts_ns[0]) if len(trace.events) else -1,
                        main_device=trace.main_device, warnings=trace.warnings, dropped=trace.dropped)
