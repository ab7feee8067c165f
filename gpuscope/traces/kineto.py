"""Read PyTorch profiler (Kineto) Chrome-trace JSON into the columnar form of ``model.trace``.

Only the fields the analyses use are decoded (msgspec skips the rest without building it), into
small structs that become numpy columns. Files past a few MB are decoded in chunks of events, so the
file's text and all its decoded events are never held at once.

Schema variants handled: capitalised categories of 2021 (``Kernel``, ``Memcpy``, ``Runtime``,
``Operator``), GPUs under ``computeProperties`` (early 2021) and thread ids written as strings
(``"4093687616"``, ``"stream 7"``), fractional-µs timestamps (``displayTimeUnit: ns``), no
``deviceProperties``, no ``distributedInfo``, no ``ProfilerStep``, ROCm/HIP traces (string byte counts, hex
stream text, unnamed devices), Intel XPU and PrivateUse1 runtime categories, CPU-only traces, and a bare JSON
array of events. Events of accelerators that are not GPUs (MTIA, HPU) are named in a warning and not read.
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TypeVar

import msgspec
import numpy as np

from gpuscope.model.redact import bare_url
from gpuscope.model.trace import Kind, RankTrace
from gpuscope.net.deadline import Timeouts
from gpuscope.traces.columns import ColumnBuilder
from gpuscope.traces.devices import gpu_info, match_pinned, name_unnamed
from gpuscope.traces.errors import TraceError
from gpuscope.traces.events import Device, Distributed, LegacyDevice, RawTrace, Trace
from gpuscope.traces.gunzip import ERRORS, GZIP_MAGIC, Text, TooLarge, gunzip
from gpuscope.traces.impossible import refuse_impossible
from gpuscope.traces.lenient import Tally
from gpuscope.traces.limits import ENV_MAX_TRACE_GIB, LimitSettingError, max_trace_bytes, open_regular, size_words
from gpuscope.traces.location import is_url
from gpuscope.traces.memory_values import refuse_impossible_memory
from gpuscope.traces.setup import version_attrs
from gpuscope.traces.split import read_events

_RANK_RE = re.compile(r"(?:rank|worker)[_\-]?(\d+)", re.IGNORECASE)
_BARE_ARRAY = re.compile(rb"\s*\[")
_D = TypeVar("_D", Trace, RawTrace)

CHUNKED_MIN_BYTES = 4 * 1024 * 1024
"""From this size on, events are kept as raw JSON and decoded a chunk at a time, so the file's text and all its
decoded events are never held at once: the peak is the text plus one chunk's events instead of the text plus
every event (about 1.5x the JSON less for Kineto's events), and small chunks stay in the CPU caches, so it
costs no time."""

_trace_decoder = msgspec.json.Decoder(Trace)
# float_hook: a literal past float64 (1e400) in a part read untyped costs that part, not the file.
_raw_trace_decoder = msgspec.json.Decoder(RawTrace, float_hook=float)


def read_bytes(path: Path | str, *, max_bytes: int | None = None, timeouts: Timeouts | None = None) -> Text:
    """The file's JSON text, gunzipped when it is gzip (by content, not by name), as a writable array of bytes
    (so chunks of events can be cut out of it in place: see ``chunks``); a bare array of events is wrapped
    in a ``traceEvents`` object. At most ``max_bytes`` of text (default: ``limits.max_trace_bytes``). ``path``
    may be an fsspec URL, read from where it is within ``timeouts`` (default: ``Timeouts()``, from now); a local
    path is read only when it is a regular file, and opening one never blocks."""
    cap = max_bytes if max_bytes is not None else trace_cap()
    if is_url(path):
        from gpuscope.traces import remote  # fsspec only where a URL is given

        try:
            data = remote.read_file(str(path), max_bytes=cap, timeouts=timeouts or Timeouts())
        except TooLarge:
            raise TraceError(bare_url(str(path)), f"over the limit of {size_words(cap)} of JSON per trace file (set "
                                                f"{ENV_MAX_TRACE_GIB} to raise it)") from None
        path = bare_url(str(path))
    else:
        data = _read_regular(Path(path), cap)
    if _blank(data):
        raise TraceError(path, "the file is empty")
    if bytes(data[:2]) == GZIP_MAGIC:
        try:
            data = gunzip(data, max_bytes=cap)
        except TooLarge:
            raise TraceError(path, f"inflates to more than {size_words(cap)} of JSON, the limit per trace file "
                                   f"(set {ENV_MAX_TRACE_GIB} to raise it)") from None
        except ERRORS as exc:
            raise TraceError(path, f"the gzip stream is corrupt or truncated ({exc})") from exc
        if _blank(data):
            raise TraceError(path, "the file is empty once gunzipped")
    if _BARE_ARRAY.match(data.data[:4096]):  # a bare array of events, as Chrome's trace format allows
        data = np.concatenate([np.frombuffer(b'{"traceEvents":', dtype=np.uint8), data,
                               np.frombuffer(b"}", dtype=np.uint8)])
    return data


def trace_cap() -> int:
    """The most JSON one trace file may hold (``GPUSCOPE_MAX_TRACE_GIB``); a TraceError naming the variable when
    it is not a usable number."""
    try:
        return max_trace_bytes()
    except LimitSettingError as exc:
        raise TraceError(ENV_MAX_TRACE_GIB, str(exc)) from None


def _read_regular(path: Path, cap: int) -> Text:
    """The bytes of a regular file of at most ``cap`` bytes."""
    with open_regular(path, what="a trace file", max_bytes=cap,
                      per=f"of JSON per trace file (set {ENV_MAX_TRACE_GIB} to raise it)") as f:
        try:
            data = np.empty(os.fstat(f.fileno()).st_size, dtype=np.uint8)
            return data[:f.readinto(data.data)]
        except OSError as exc:
            raise TraceError(path, f"cannot read: {exc.strerror or exc}") from exc


def _blank(text: Text) -> bool:
    """Empty or whitespace only (the whole text is looked at only when its first 4 KiB are blank)."""
    head = bytes(text[:4096])
    return not head.strip() and (len(text) <= len(head) or not text.tobytes().strip())


def read_trace(path: Path | str, *, rank: int | None = None, timeouts: Timeouts | None = None,
               hash_content: bool = True, jobs: int = 1) -> RankTrace:
    """Read one rank's trace file (``.json`` or ``.json.gz``); a URL within ``timeouts``. Without
    ``hash_content``, ``RankTrace.content_sha256`` is left empty (unknown): for a reading nothing is saved from.
    A large file's events are decoded in up to ``jobs`` processes (``split``), with the same result as in one.

    Events with fields of the wrong type lose the field, or are dropped when they mean nothing without it;
    ``RankTrace.warnings`` says how many and which. A file with no usable event is a TraceError.
    """
    try:
        return _read_trace(path, rank, timeouts, hash_content, jobs)
    except MemoryError:
        raise TraceError(bare_url(str(path)) if is_url(path) else path, "not enough memory to read it") from None


def _read_trace(path: Path | str, rank: int | None, timeouts: Timeouts | None, hash_content: bool,
                jobs: int) -> RankTrace:
    data = read_bytes(path, timeouts=timeouts)
    digest = _Digest(data if hash_content else None)
    path = bare_url(str(path)) if is_url(path) else Path(path)
    was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived objects, none cyclic
    try:
        builder = ColumnBuilder()
        tally = Tally()
        whole = _decode_typed(path, data) if len(data) < CHUNKED_MIN_BYTES else None
        if whole is not None:
            digest.wait()
            del data  # the text goes before the columns are built
            devices = whole.deviceProperties or [d.device() for d in whole.computeProperties]
            top = _Top(devices=tuple(devices), distributed=whole.distributedInfo,
                       versions=version_attrs({"cuda_runtime_version": whole.cuda_runtime_version,
                                               "cuda_driver_version": whole.cuda_driver_version}),
                       base_time_ns=_base_time(whole.baseTimeNanoseconds), host_name=_host_name(whole.host_name))
            builder.add(whole.traceEvents)
            del whole
        else:
            top = _decode_chunked(path, data, builder, tally, read_whole=digest.wait, jobs=jobs)
            del data
        events, memory, names = builder.finish()
        collectives = builder.collectives()
        unread = _unread_line(builder.unread)
        shapes = builder.shapes()
    finally:
        digest.join()  # the thread is never left running, whatever ended the decoding
        if was_enabled:
            gc.enable()
    problems = tuple(line for line in (tally.summary(), *top.problems, unread) if line)
    if not len(events) and not len(memory.ts_ns):
        raise TraceError(path, "no usable events" + (f" ({'; '.join(problems)})" if problems else ""))
    if not len(memory.ts_ns) and not builder.unread and (events.kind == Kind.OTHER).all():
        # A Chrome trace of another tool (TensorFlow's, a browser's): read as a profiler trace it would be a "CPU
        # job" with nothing in it.
        raise TraceError(path, f"not a PyTorch profiler trace: none of its {len(events):,} complete events is of a "
                               "category Kineto writes (cpu_op, user_annotation, kernel, cuda_runtime, ...)",
                         not_a_trace=True)
    events, dropped = refuse_impossible(events, names)
    gpus, named = name_unnamed(tuple(gpu_info(d) for d in top.devices), top.devices)
    gpus, memory, pinned = match_pinned(gpus, events, memory)
    memory, impossible = refuse_impossible_memory(memory)
    problems = (*problems, *(line for line in (named, pinned, impossible) if line is not None))
    dist = top.distributed
    rank_given = rank is not None or (dist is not None and dist.rank is not None)
    if rank is None:
        rank = dist.rank if dist is not None and dist.rank is not None else _rank_from_name(path)
    return RankTrace(
        rank=rank if rank is not None else 0,
        source=str(path),
        events=events,
        memory=memory,
        names=names,
        collectives=collectives,
        gpus=gpus,
        world_size=dist.world_size if dist is not None else None,
        backend=dist.backend if dist is not None else None,
        pid=builder.pid,
        attrs={**top.versions, **builder.first_layer.attrs()},
        rank_given=rank_given,
        warnings=tuple(f"{path}: {line}" for line in problems),
        base_time_ns=top.base_time_ns,
        content_sha256=digest.wait(),
        shapes=shapes,
        host_name=top.host_name,
        dropped=dropped,
    )


def _unread_line(unread: dict[str, int]) -> str | None:
    """The warning for an accelerator's events gpuscope does not read; None when there are none."""
    if not unread:
        return None
    devices = " and ".join(f"{n:,} events of the {d} accelerator" for d, n in unread.items())
    return (f"{devices}, not a GPU: gpuscope reads none of its work, so the report covers the host side alone (and "
            "any GPU work)")


@dataclass(frozen=True)
class _Top:
    """What a trace says of itself beside its events, and what of that had the wrong shape."""

    devices: tuple[Device, ...]
    distributed: Distributed | None
    problems: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    """The CUDA versions the file states (``gpuscope.traces.setup.version_attrs``)."""
    base_time_ns: int | None = None
    host_name: str | None = None


def _host_name(value: object) -> str | None:
    """``host_name`` when it is a non-empty string (of a sane length); anything else is left out."""
    return value if isinstance(value, str) and 0 < len(value) <= 255 else None


def _base_time(value: object) -> int | None:
    """``baseTimeNanoseconds`` when it is a positive whole number of nanoseconds; anything else is left out."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63 else None


def _decode_typed(path: Path | str, data: Text) -> Trace | None:
    """The fast path: one typed decode of the whole file; None when it fails for any reason (a field of the wrong
    type, a string that is not UTF-8, text that is not JSON): the chunked path then keeps what can be kept, or
    says what is wrong with the file."""
    try:
        return _trace_decoder.decode(data.data)
    except (msgspec.DecodeError, RecursionError):  # DecodeError includes ValidationError
        return None


def _decode_chunked(path: Path | str, data: Text, builder: ColumnBuilder, tally: Tally, *,
                    read_whole: Callable[[], object] = lambda: None, jobs: int = 1) -> _Top:
    """Events kept raw and decoded a chunk at a time, in up to ``jobs`` processes (``split.read_events``); a chunk
    that fails the typed decode is decoded event by event, leniently. ``read_whole`` is called before the first
    chunk is cut out of the text (which writes brackets into it): whatever reads the text as it was must be done by
    then."""
    try:
        top = _decode(path, data, _raw_trace_decoder)
    except _WrongType as exc:
        raise TraceError(path, f"`traceEvents` has the wrong type or shape: {exc}") from exc
    read_whole()
    raws = top.traceEvents
    top.traceEvents = []
    read_events(data, raws, builder, tally, jobs=jobs)
    del raws
    problems = []
    devices: list[Device] = []
    distributed: Distributed | None = None
    try:
        devices = msgspec.convert(top.deviceProperties or [], list[Device])
    except msgspec.ValidationError:
        problems.append("`deviceProperties` has the wrong shape, left out")
    if not devices and top.computeProperties:
        try:
            devices = [d.device() for d in msgspec.convert(top.computeProperties, list[LegacyDevice])]
        except msgspec.ValidationError:
            problems.append("`computeProperties` has the wrong shape, left out")
    try:
        distributed = msgspec.convert(top.distributedInfo, Distributed | None)
    except msgspec.ValidationError:
        problems.append("`distributedInfo` has the wrong shape, left out")
    versions = version_attrs({"cuda_runtime_version": top.cuda_runtime_version,
                              "cuda_driver_version": top.cuda_driver_version})
    return _Top(devices=tuple(devices), distributed=distributed, problems=tuple(problems), versions=versions,
                base_time_ns=_base_time(top.baseTimeNanoseconds), host_name=_host_name(top.host_name))


class _Digest:
    """The SHA-256 of a trace's text (``RankTrace.content_sha256``), computed on a thread of its own while the
    events are decoded: hashlib lets go of the GIL while it hashes, so a free core hashes the text as the reader
    decodes it. ``wait`` gives the hex digest, once the thread is done; "" for no text (nothing hashed)."""

    def __init__(self, text: Text | None) -> None:
        self._hex = ""
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(text,), name="gpuscope-trace-hash", daemon=True)
        if text is not None:
            self._thread.start()

    def _run(self, text: Text) -> None:
        try:
            self._hex = hashlib.sha256(text.data).hexdigest()
        except BaseException as exc:  # handed to the reading thread (a MemoryError, say) by ``wait``
            self._error = exc

    def join(self) -> None:
        if self._thread.ident is not None:
            self._thread.join()

    def wait(self) -> str:
        self.join()
        if self._error is not None:
            raise self._error
        return self._hex


def _rank_from_name(path: Path | str) -> int | None:
    match = _RANK_RE.search(PurePosixPath(path).name)
    return int(match.group(1)) if match else None


class _WrongType(Exception):
    """A typed decode failed on a value of the wrong type (the JSON itself is valid)."""


def _decode(path: Path | str, data: Text, decoder: msgspec.json.Decoder[_D]) -> _D:
    try:
        return decoder.decode(data.data)
    except msgspec.ValidationError as exc:
        if "missing required field `traceEvents`" in str(exc):
            raise TraceError(path, "not a profiler trace: the JSON has no `traceEvents`", not_a_trace=True) from exc
        raise _WrongType(str(exc)) from exc
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"not valid JSON ({exc})") from exc
    except RecursionError:  # msgspec's decoder recurses once per level, bounded by Python's recursion limit
        raise TraceError(path, f"arrays or objects nested too deeply to read (about {sys.getrecursionlimit()} "
                               f"levels at most; a profiler trace nests a few)") from None
