"""The slice of Kineto's Chrome-trace JSON that gpuscope decodes: msgspec skips every other field unbuilt.

Every number has a stated range, checked as it is decoded: a value outside it is a field of the wrong type
(``lenient`` then drops the field or the event and says so), never a column that overflows into nonsense.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from gpuscope.model.trace import DUR_MAX_NS, TS_MAX_NS, TS_MIN_NS, Kind

NAN = float("nan")

TS_MIN_US = TS_MIN_NS / 1000
TS_MAX_US = TS_MAX_NS / 1000
"""Timestamps in µs, within the model's range (``model.trace.TS_MIN_NS``, ``TS_MAX_NS``)."""
DUR_LIMIT_US = DUR_MAX_NS / 1000
"""The longest event (``model.trace.DUR_MAX_NS``: 7 days)."""

Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
UINT32_NONE = 2**32 - 1
"""CUPTI's "no stream" as an unsigned 32-bit -1 (``cuda_sync`` events of a context-wide sync carry it)."""
StreamId = Annotated[int, msgspec.Meta(ge=-(2**31), le=UINT32_NONE)]
"""A stream id: int32, or up to CUPTI's unsigned "no stream", which the columns read as -1 (none)."""
TsUs = Annotated[float, msgspec.Meta(ge=TS_MIN_US, le=TS_MAX_US)]
DurUs = Annotated[float, msgspec.Meta(ge=0.0, le=DUR_LIMIT_US)]
Ratio = Annotated[float, msgspec.Meta(ge=-3.4e38, le=3.4e38)]
"""Stored as float32."""


class Args(msgspec.Struct, gc=False):
    # Defaults instead of None keep every column a plain int or float list, which numpy converts fast.
    correlation: Int64 = -1
    external_id: Int64 = msgspec.field(name="External id", default=-1)
    external_id_lc: Int64 = msgspec.field(name="external id", default=-1)
    sequence: Int64 = msgspec.field(name="Sequence number", default=-1)
    stream: StreamId = -1
    device: Int32 = -1
    bytes: Int64 = -1
    blocks_per_sm: Ratio = msgspec.field(name="blocks per SM", default=NAN)
    warps_per_sm: Ratio = msgspec.field(name="warps per SM", default=NAN)
    # A tuple, so the lists of a trace's ops intern by value (record_shapes traces only).
    input_types: tuple[str, ...] | None = msgspec.field(name="Input type", default=None)
    # Kept raw (a slice of the text, not decoded): only the first call of a model's first layer is read.
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw())
    input_dims_2021: msgspec.Raw = msgspec.field(name="Input dims", default=msgspec.Raw())
    concrete_inputs: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=msgspec.Raw())
    # PyTorch 2.x comms args on record_param_comms / nccl:* host ops (torch/csrc/profiler/util.h)
    collective: str = msgspec.field(name="Collective name", default="")
    dtype: str = ""
    in_nelems: Int64 = msgspec.field(name="In msg nelems", default=-1)
    out_nelems: Int64 = msgspec.field(name="Out msg nelems", default=-1)
    group_size: Int64 = msgspec.field(name="Group size", default=-1)
    # Newer PyTorch also names the process group and numbers the collective in it (ParamCommsUtils: kSeqNum).
    group_name: str | Int64 = msgspec.field(name="Process Group Name", default="")
    seq: Int64 = msgspec.field(name="Seq", default=-1)
    # [memory] instant events
    mem_bytes: Int64 = msgspec.field(name="Bytes", default=0)
    total_allocated: Int64 = msgspec.field(name="Total Allocated", default=-1)
    device_type: Int32 = msgspec.field(name="Device Type", default=-1)
    device_id: Int32 = msgspec.field(name="Device Id", default=-1)
    addr: Int64 = msgspec.field(name="Addr", default=-1)
    total_reserved: Int64 = msgspec.field(name="Total Reserved", default=-1)


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Int64 | str = -1
    tid: Int64 | str = -1
    ts: TsUs = NAN
    dur: DurUs = 0.0
    args: Args | None = None


class Device(msgspec.Struct):
    id: Int32 = 0
    name: str | None = None
    totalGlobalMem: Int64 | None = None
    computeMajor: Int32 | None = None
    computeMinor: Int32 | None = None
    numSms: Int32 | None = None
    warpSize: Int32 | None = None


class LegacyDevice(msgspec.Struct):
    """A GPU as Kineto of early 2021 described it, under ``computeProperties`` with CUDA's own field names."""

    id: Int32 = 0
    name: str | None = None
    totalGlobalMem: Int64 | None = None
    major: Int32 | None = None
    minor: Int32 | None = None
    multiProcessorCount: Int32 | None = None
    warpSize: Int32 | None = None

    def device(self) -> Device:
        return Device(id=self.id, name=self.name, totalGlobalMem=self.totalGlobalMem, computeMajor=self.major,
                      computeMinor=self.minor, numSms=self.multiProcessorCount, warpSize=self.warpSize)


class Distributed(msgspec.Struct):
    rank: Int32 | None = None
    world_size: Int32 | None = None
    backend: str | None = None


class Trace(msgspec.Struct):
    traceEvents: list[Event]
    deviceProperties: list[Device] = []
    computeProperties: list[LegacyDevice] = []
    distributedInfo: Distributed | None = None
    # Any type: a version written in an unexpected form is left out, not a reason to decode the file slowly.
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    baseTimeNanoseconds: Any = None
    host_name: Any = None


KINDS: dict[str, Kind] = {
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "hip_runtime": Kind.RUNTIME,
    # Intel GPUs (XPUPTI) and out-of-tree backends (PrivateUse1) write their runtime calls in categories of their
    # own; their kernels and copies are "kernel", "gpu_memcpy" and "gpu_memset" as on CUDA (kineto ActivityType.h).
    "xpu_runtime": Kind.RUNTIME,
    "xpu_driver": Kind.RUNTIME,
    "privateuse1_runtime": Kind.RUNTIME,
    "privateuse1_driver": Kind.RUNTIME,
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "python_function": Kind.PYTHON,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
}
NO_ARGS = Args()
UNREAD_DEVICES: dict[str, str] = {
    "mtia_runtime": "MTIA", "mtia_ccp_events": "MTIA", "mtia_insight": "MTIA", "mtia_counters": "MTIA",
    "hpu_op": "HPU (Gaudi)", "glow_runtime": "Glow",
}
"""Kineto's categories of accelerators that are not GPUs (ActivityType.h): their device work has a model of its own
(command queues, DMA and processing-element events), so gpuscope reads none of it, and says so."""


class RawTrace(msgspec.Struct):
    """The same document with each event kept as its raw JSON text, decoded later in chunks, and the
    other parts left untyped, so that a part of the wrong shape costs only that part."""

    traceEvents: list[msgspec.Raw]
    deviceProperties: Any = None
    computeProperties: Any = None
    distributedInfo: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    baseTimeNanoseconds: Any = None
    host_name: Any = None
