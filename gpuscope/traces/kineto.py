"""Read PyTorch profiler (Kineto) Chrome-trace JSON into the columnar form of ``model.trace``.

Only the fields the analyses use are decoded (msgspec skips the rest without building it), and
each event is decoded from a raw slice of the file and dropped at once, so peak memory is the
JSON text plus the columns, not a tree of Python dicts.

Schema variants handled: capitalised categories of 2021 (``Kernel``, ``Memcpy``, ``Runtime``,
``Operator``), fractional-µs timestamps (``displayTimeUnit: ns``), no ``deviceProperties``, no
``distributedInfo``, no ``ProfilerStep``, ROCm/HIP traces, CPU-only traces, and a bare JSON
array of events.
"""

from __future__ import annotations

import gc
import gzip
import re
import zlib
from pathlib import Path
from typing import TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

from gpuscope.model.run import GpuInfo
from gpuscope.model.trace import GPU_KINDS, Events, Kind, MemoryEvents, RankTrace


class TraceError(Exception):
    """A trace file gpuscope cannot read; the message names the file and what is wrong."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


_NAN = float("nan")
_T = TypeVar("_T")


class _Args(msgspec.Struct, gc=False):
    # Defaults instead of None keep every column a plain int or float list, which numpy converts fast.
    correlation: int = -1
    external_id: int = msgspec.field(name="External id", default=-1)
    external_id_lc: int = msgspec.field(name="external id", default=-1)
    stream: int = -1
    device: int = -1
    bytes: int = -1
    blocks_per_sm: float = msgspec.field(name="blocks per SM", default=_NAN)
    warps_per_sm: float = msgspec.field(name="warps per SM", default=_NAN)
    # [memory] instant events
    mem_bytes: int = msgspec.field(name="Bytes", default=0)
    total_allocated: int = msgspec.field(name="Total Allocated", default=-1)
    device_type: int = msgspec.field(name="Device Type", default=-1)
    device_id: int = msgspec.field(name="Device Id", default=-1)


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    tid: int | str = -1
    ts: float = _NAN
    dur: float = 0.0
    args: _Args | None = None


class _Device(msgspec.Struct):
    id: int = 0
    name: str | None = None
    totalGlobalMem: int | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None
    numSms: int | None = None


class _Distributed(msgspec.Struct):
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]
    deviceProperties: list[_Device] = []
    distributedInfo: _Distributed | None = None
    displayTimeUnit: str | None = None


_KINDS: dict[str, Kind] = {
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
_HOST_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)
_STREAM_RE = re.compile(r"(\d+)\s*$")
_RANK_RE = re.compile(r"(?:rank|worker)[_\-]?(\d+)", re.IGNORECASE)

_trace_decoder = msgspec.json.Decoder(_Trace)
_events_decoder = msgspec.json.Decoder(list[_Event])
_NO_ARGS = _Args()


def read_bytes(path: Path) -> bytes:
    """The file's JSON text, gunzipped when it is gzip (by content, not by name)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from exc
    if not data.strip():
        raise TraceError(path, "the file is empty")
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(path, f"the gzip stream is corrupt or truncated ({exc})") from exc
        if not data.strip():
            raise TraceError(path, "the file is empty once gunzipped")
    return data


def read_trace(path: Path | str, *, rank: int | None = None) -> RankTrace:
    """Read one rank's trace file (``.json`` or ``.json.gz``)."""
    path = Path(path)
    data = read_bytes(path)
    was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived objects, none cyclic
    try:
        top = _decode(path, data)
        del data
        events, memory, names = _columns(top.traceEvents)
        del top.traceEvents[:]
    finally:
        if was_enabled:
            gc.enable()
    dist = top.distributedInfo
    if rank is None:
        rank = dist.rank if dist is not None and dist.rank is not None else _rank_from_name(path)
    return RankTrace(
        rank=rank if rank is not None else 0,
        source=str(path),
        events=events,
        memory=memory,
        names=names,
        gpus=tuple(_gpu(d) for d in top.deviceProperties),
        world_size=dist.world_size if dist is not None else None,
        backend=dist.backend if dist is not None else None,
    )


def _rank_from_name(path: Path) -> int | None:
    match = _RANK_RE.search(path.name)
    return int(match.group(1)) if match else None


def _gpu(dev: _Device) -> GpuInfo:
    cc = f"{dev.computeMajor}.{dev.computeMinor}" if dev.computeMajor is not None else None
    return GpuInfo(index=dev.id, name=dev.name, memory_bytes=dev.totalGlobalMem, sm_count=dev.numSms,
                   compute_capability=cc)


def _decode(path: Path, data: bytes) -> _Trace:
    try:
        if data.lstrip()[:1] == b"[":
            return _Trace(traceEvents=_events_decoder.decode(data))
        return _trace_decoder.decode(data)
    except msgspec.ValidationError as exc:
        problem = str(exc)
        if "missing required field `traceEvents`" in problem:
            raise TraceError(path, "not a profiler trace: the JSON has no `traceEvents`") from exc
        raise TraceError(path, f"an event field has the wrong type or shape: {problem}") from exc
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"not valid JSON ({exc})") from exc


def _columns(raw: list[_Event]) -> tuple[Events, MemoryEvents, tuple[str, ...]]:
    xs = [e for e in raw if e.ph == "X"]
    mem = [e for e in raw if e.ph == "i" and e.name == "[memory]" and e.args is not None]
    ts = np.array([e.ts for e in xs], dtype=np.float64)
    keep = ~np.isnan(ts)
    if not keep.all():
        xs = [e for e, k in zip(xs, keep.tolist()) if k]
        ts = ts[keep]
    n = len(xs)
    if n == 0:
        return _empty_events(), _memory(mem), ()
    name_id, names = _intern([e.name for e in xs])
    cat_id, cats = _intern([e.cat for e in xs])
    kind = np.array([int(_KINDS.get(c.lower(), Kind.OTHER)) for c in cats], dtype=np.uint8)[cat_id]
    is_step = np.array([x.startswith("ProfilerStep#") for x in names], dtype=bool)
    if is_step.any():
        host = np.isin(kind, np.array(_HOST_KINDS, dtype=np.uint8))
        kind[host & is_step[name_id]] = Kind.STEP
    tid, stream_of_tid = _threads([e.tid for e in xs])
    args = [e.args or _NO_ARGS for e in xs]
    stream = np.array([a.stream for a in args], dtype=np.int32)
    if stream_of_tid:
        # 2021 traces name GPU threads "stream 7" and may leave args.stream out
        gpu = np.isin(kind, np.array(GPU_KINDS, dtype=np.uint8)) & (stream < 0)
        if gpu.any():
            stream[gpu] = [stream_of_tid.get(t, -1) for t in tid[gpu].tolist()]
    ext = np.array([a.external_id for a in args], dtype=np.int64)
    ext = np.where(ext >= 0, ext, np.array([a.external_id_lc for a in args], dtype=np.int64))
    dur = np.array([e.dur for e in xs], dtype=np.float64)
    ts_ns = np.rint(ts * 1000.0).astype(np.int64)
    order = np.argsort(ts_ns, kind="stable")
    events = Events(
        ts_ns=ts_ns[order],
        dur_ns=np.maximum(np.rint(dur * 1000.0), 0).astype(np.int64)[order],
        kind=kind[order],
        name_id=name_id[order],
        tid=tid[order],
        stream=stream[order],
        device=np.array([a.device for a in args], dtype=np.int32)[order],
        correlation=np.array([a.correlation for a in args], dtype=np.int64)[order],
        external_id=ext[order],
        bytes=np.array([a.bytes for a in args], dtype=np.int64)[order],
        blocks_per_sm=np.array([a.blocks_per_sm for a in args], dtype=np.float32)[order],
        warps_per_sm=np.array([a.warps_per_sm for a in args], dtype=np.float32)[order],
    )
    return events, _memory(mem), names


def _intern(values: list[_T]) -> tuple[npt.NDArray[np.int32], tuple[_T, ...]]:
    """Codes into a table of distinct values, in order of first appearance (a dict does the hashing)."""
    table: dict[_T, int] = {}
    codes = [table.setdefault(v, len(table)) for v in values]
    return np.array(codes, dtype=np.int32), tuple(table)


def _threads(raw: list[int | str]) -> tuple[npt.NDArray[np.int64], dict[int, int]]:
    """Thread ids as ints: numeric ids stay, names ("stream 7", "PyTorch Profiler") get negative ids.

    Also returns the stream number each named GPU thread carries, by its id."""
    codes, uniques = _intern(raw)
    mapped = np.empty(len(uniques), dtype=np.int64)
    stream_of: dict[int, int] = {}
    named = 0
    for i, u in enumerate(uniques):
        if isinstance(u, int):
            mapped[i] = u
            continue
        named += 1
        mapped[i] = -1 - named
        if m := _STREAM_RE.search(str(u)):
            stream_of[-1 - named] = int(m.group(1))
    return mapped[codes], stream_of


def _empty_events() -> Events:
    i64, i32 = np.empty(0, np.int64), np.empty(0, np.int32)
    f32 = np.empty(0, np.float32)
    return Events(ts_ns=i64, dur_ns=i64, kind=np.empty(0, np.uint8), name_id=i32, tid=i64, stream=i32, device=i32,
                  correlation=i64, external_id=i64, bytes=i64, blocks_per_sm=f32, warps_per_sm=f32)


def _memory(rows: list[_Event]) -> MemoryEvents:
    rows = [e for e in rows if e.ts == e.ts]  # drop NaN (missing) times
    args = [e.args or _NO_ARGS for e in rows]
    ts_ns = np.rint(np.array([e.ts for e in rows], dtype=np.float64) * 1000.0).astype(np.int64)
    order = np.argsort(ts_ns, kind="stable")
    return MemoryEvents(
        ts_ns=ts_ns[order],
        bytes=np.array([a.mem_bytes for a in args], dtype=np.int64)[order],
        total_allocated_bytes=np.array([a.total_allocated for a in args], dtype=np.int64)[order],
        device_type=np.array([a.device_type for a in args], dtype=np.int32)[order],
        device_id=np.array([a.device_id for a in args], dtype=np.int32)[order],
    )
