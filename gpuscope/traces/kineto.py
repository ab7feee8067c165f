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

import msgspec
import numpy as np
import numpy.typing as npt
import pandas as pd

from gpuscope.model.run import GpuInfo
from gpuscope.model.trace import GPU_KINDS, Events, Kind, MemoryEvents, RankTrace


class TraceError(Exception):
    """A trace file gpuscope cannot read; the message names the file and what is wrong."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


class _Args(msgspec.Struct, gc=False):
    correlation: int | None = None
    external_id: int | None = msgspec.field(name="External id", default=None)
    external_id_lc: int | None = msgspec.field(name="external id", default=None)
    stream: int | None = None
    device: int | None = None
    bytes: int | None = None
    blocks_per_sm: float | None = msgspec.field(name="blocks per SM", default=None)
    warps_per_sm: float | None = msgspec.field(name="warps per SM", default=None)
    # [memory] instant events
    mem_bytes: int | None = msgspec.field(name="Bytes", default=None)
    total_allocated: int | None = msgspec.field(name="Total Allocated", default=None)
    device_type: int | None = msgspec.field(name="Device Type", default=None)
    device_id: int | None = msgspec.field(name="Device Id", default=None)


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str = ""
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
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


def _int_column(values: list[int | None]) -> npt.NDArray[np.int64]:
    """Ints with None as -1 (float64 holds every id and byte count a trace has exactly, up to 2**53)."""
    arr = np.array(values, dtype=np.float64)
    np.nan_to_num(arr, copy=False, nan=-1.0)
    return arr.astype(np.int64)


def _columns(raw: list[_Event]) -> tuple[Events, MemoryEvents, tuple[str, ...]]:
    xs = [e for e in raw if e.ph == "X" and e.ts is not None]
    mem = [e for e in raw if e.ph == "i" and e.name == "[memory]" and e.args is not None and e.ts is not None]
    n = len(xs)
    names_arr = np.array([e.name for e in xs], dtype=object)
    name_id, uniq = pd.factorize(names_arr) if n else (np.empty(0, np.int64), np.empty(0, object))
    names = tuple(str(x) for x in uniq)
    cats = [e.cat.lower() if e.cat else "" for e in xs]
    cat_id, cat_uniq = pd.factorize(np.array(cats, dtype=object)) if n else (np.empty(0, np.int64), [])
    kind = np.array([int(_KINDS.get(c, Kind.OTHER)) for c in cat_uniq], dtype=np.uint8)[cat_id] if n else (
        np.empty(0, np.uint8))
    is_step = np.array([x.startswith("ProfilerStep#") for x in names], dtype=bool)
    if n and is_step.any():
        host = np.isin(kind, np.array(_HOST_KINDS, dtype=np.uint8))
        kind[host & is_step[name_id]] = Kind.STEP
    tid_raw = [e.tid for e in xs]
    thread_ids: dict[str, int] = {}
    tid = np.array([t if type(t) is int else (-1 if t is None else thread_ids.setdefault(str(t), -2 - len(thread_ids)))
                    for t in tid_raw], dtype=np.int64)
    args = [e.args or _NO_ARGS for e in xs]
    stream = _int_column([a.stream for a in args])
    if thread_ids:
        # 2021 traces name GPU threads "stream 7" and may leave args.stream out
        from_name = {v: int(m.group(1)) for k, v in thread_ids.items() if (m := _STREAM_RE.search(k))}
        gpu = np.isin(kind, np.array(GPU_KINDS, dtype=np.uint8)) & (stream < 0)
        if from_name and gpu.any():
            stream[gpu] = [from_name.get(int(t), -1) for t in tid[gpu]]
    ext = _int_column([a.external_id for a in args])
    ext_lc = _int_column([a.external_id_lc for a in args])
    ext = np.where(ext >= 0, ext, ext_lc)
    ts = np.array([e.ts for e in xs], dtype=np.float64)
    dur = np.array([e.dur for e in xs], dtype=np.float64)
    np.nan_to_num(dur, copy=False, nan=0.0)
    ts_ns = np.rint(ts * 1000.0).astype(np.int64)
    order = np.argsort(ts_ns, kind="stable")
    events = Events(
        ts_ns=ts_ns[order],
        dur_ns=np.maximum(np.rint(dur * 1000.0), 0).astype(np.int64)[order],
        kind=kind[order],
        name_id=name_id.astype(np.int32)[order],
        tid=tid[order],
        stream=stream.astype(np.int32)[order],
        device=_int_column([a.device for a in args]).astype(np.int32)[order],
        correlation=_int_column([a.correlation for a in args])[order],
        external_id=ext[order],
        bytes=_int_column([a.bytes for a in args])[order],
        blocks_per_sm=np.array([a.blocks_per_sm for a in args], dtype=np.float32)[order],
        warps_per_sm=np.array([a.warps_per_sm for a in args], dtype=np.float32)[order],
    )
    return events, _memory(mem), names


def _memory(rows: list[_Event]) -> MemoryEvents:
    args = [e.args or _NO_ARGS for e in rows]
    ts_ns = np.rint(np.array([e.ts for e in rows], dtype=np.float64) * 1000.0).astype(np.int64)
    order = np.argsort(ts_ns, kind="stable")
    return MemoryEvents(
        ts_ns=ts_ns[order],
        bytes=_int_column([a.mem_bytes for a in args])[order],
        total_allocated_bytes=_int_column([a.total_allocated for a in args])[order],
        device_type=_int_column([a.device_type for a in args]).astype(np.int32)[order],
        device_id=_int_column([a.device_id for a in args]).astype(np.int32)[order],
    )
