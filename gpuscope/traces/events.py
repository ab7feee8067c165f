"""The slice of Kineto's Chrome-trace JSON that gpuscope decodes: msgspec skips every other field unbuilt."""

from __future__ import annotations

from typing import Any

import msgspec

from gpuscope.model.trace import Kind

NAN = float("nan")


class Args(msgspec.Struct, gc=False):
    # Defaults instead of None keep every column a plain int or float list, which numpy converts fast.
    correlation: int = -1
    external_id: int = msgspec.field(name="External id", default=-1)
    external_id_lc: int = msgspec.field(name="external id", default=-1)
    stream: int = -1
    device: int = -1
    bytes: int = -1
    blocks_per_sm: float = msgspec.field(name="blocks per SM", default=NAN)
    warps_per_sm: float = msgspec.field(name="warps per SM", default=NAN)
    # A tuple, so the lists of a trace's ops intern by value (record_shapes traces only).
    input_types: tuple[str, ...] | None = msgspec.field(name="Input type", default=None)
    # Kept raw (a slice of the text, not decoded): only the first call of a model's first layer is read.
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw())
    input_dims_2021: msgspec.Raw = msgspec.field(name="Input dims", default=msgspec.Raw())
    # PyTorch 2.x comms args on record_param_comms / nccl:* host ops (torch/csrc/profiler/util.h)
    collective: str = msgspec.field(name="Collective name", default="")
    dtype: str = ""
    in_nelems: int = msgspec.field(name="In msg nelems", default=-1)
    out_nelems: int = msgspec.field(name="Out msg nelems", default=-1)
    group_size: int = msgspec.field(name="Group size", default=-1)
    # [memory] instant events
    mem_bytes: int = msgspec.field(name="Bytes", default=0)
    total_allocated: int = msgspec.field(name="Total Allocated", default=-1)
    device_type: int = msgspec.field(name="Device Type", default=-1)
    device_id: int = msgspec.field(name="Device Id", default=-1)


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = -1
    tid: int | str = -1
    ts: float = NAN
    dur: float = 0.0
    args: Args | None = None


class Device(msgspec.Struct):
    id: int = 0
    name: str | None = None
    totalGlobalMem: int | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None
    numSms: int | None = None


class Distributed(msgspec.Struct):
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None


class Trace(msgspec.Struct):
    traceEvents: list[Event]
    deviceProperties: list[Device] = []
    distributedInfo: Distributed | None = None
    # Any type: a version written in an unexpected form is left out, not a reason to decode the file slowly.
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None


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
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "python_function": Kind.PYTHON,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
}
NO_ARGS = Args()


class RawTrace(msgspec.Struct):
    """The same document with each event kept as its raw JSON text, decoded later in chunks, and the
    other parts left untyped, so that a part of the wrong shape costs only that part."""

    traceEvents: list[msgspec.Raw]
    deviceProperties: Any = None
    distributedInfo: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
