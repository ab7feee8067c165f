"""Read PyTorch profiler (Kineto) Chrome-trace JSON into the columnar form of ``model.trace``.

Only the fields the analyses use are decoded (msgspec skips the rest without building it), into
small structs that become numpy columns. Large files are decoded in chunks of events, so the file's
text and all its decoded events are never held at once.

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

from gpuscope.model.run import GpuInfo
from gpuscope.model.trace import RankTrace
from gpuscope.traces.columns import ColumnBuilder
from gpuscope.traces.events import Device, Event, RawTrace, Trace


class TraceError(Exception):
    """A trace file gpuscope cannot read; the message names the file and what is wrong."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


_RANK_RE = re.compile(r"(?:rank|worker)[_\-]?(\d+)", re.IGNORECASE)
_BARE_ARRAY = re.compile(rb"\s*\[")
_D = TypeVar("_D", Trace, RawTrace)

CHUNKED_MIN_BYTES = 96 * 1024 * 1024
"""From this size on, events are decoded in chunks so the file's text and all its decoded events are never
held at once (the decoded events of one chunk at a time instead of all of them: about 1x the JSON less
at the peak, for ~10% more time)."""
CHUNK_EVENTS = 20_000

_trace_decoder = msgspec.json.Decoder(Trace)
_raw_trace_decoder = msgspec.json.Decoder(RawTrace)
_events_decoder = msgspec.json.Decoder(list[Event])


def read_bytes(path: Path) -> bytes:
    """The file's JSON text, gunzipped when it is gzip (by content, not by name)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from exc
    if not data or data.isspace():  # not data.strip(): that copies the whole file
        raise TraceError(path, "the file is empty")
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(path, f"the gzip stream is corrupt or truncated ({exc})") from exc
        if not data or data.isspace():
            raise TraceError(path, "the file is empty once gunzipped")
    return data


def read_trace(path: Path | str, *, rank: int | None = None) -> RankTrace:
    """Read one rank's trace file (``.json`` or ``.json.gz``)."""
    path = Path(path)
    data = read_bytes(path)
    was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived objects, none cyclic
    try:
        builder = ColumnBuilder()
        top: Trace | RawTrace
        if len(data) < CHUNKED_MIN_BYTES:
            top = _decode(path, data, _trace_decoder)
            del data
            builder.add(top.traceEvents)
        else:
            top = _decode(path, data, _raw_trace_decoder)
            raws = top.traceEvents
            for start in range(0, len(raws), CHUNK_EVENTS):
                chunk = b"[" + b",".join(raws[start:start + CHUNK_EVENTS]) + b"]"
                builder.add(_decode_events(path, chunk, start))
            del raws, data
        top.traceEvents = []
        events, memory, names = builder.finish()
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


def _gpu(dev: Device) -> GpuInfo:
    cc = f"{dev.computeMajor}.{dev.computeMinor}" if dev.computeMajor is not None else None
    return GpuInfo(index=dev.id, name=dev.name, memory_bytes=dev.totalGlobalMem, sm_count=dev.numSms,
                   compute_capability=cc)


def _decode(path: Path, data: bytes, decoder: msgspec.json.Decoder[_D]) -> _D:
    try:
        if _BARE_ARRAY.match(data):  # a bare array of events, as Chrome's trace format allows
            return decoder.decode(b'{"traceEvents":' + data + b"}")
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        problem = str(exc)
        if "missing required field `traceEvents`" in problem:
            raise TraceError(path, "not a profiler trace: the JSON has no `traceEvents`") from exc
        raise TraceError(path, f"an event field has the wrong type or shape: {problem}") from exc
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"not valid JSON ({exc})") from exc


def _decode_events(path: Path, chunk: bytes, first: int) -> list[Event]:
    try:
        return _events_decoder.decode(chunk)
    except msgspec.ValidationError as exc:
        raise TraceError(path, f"an event field has the wrong type or shape: {exc} (events from {first})") from exc
