"""Capture traces: a profiler trace taken while a serving engine captured its CUDA/HIP graphs (vLLM's and SGLang's
``capture_traces``). Capture launches each kernel once into the graph without running it, so the trace holds the
launch calls (with the kernel's name in ``args.kernel``) and the operators around them, but no kernels; a replay
later runs those kernels under one ``cudaGraphLaunch``. Read here into the graph's kernels in launch order, each
with the innermost operator that launched it, so the replays' GPU time can be given to operators.

A graph is the launches between a ``cudaStreamBeginCapture``/``hipStreamBeginCapture`` and the matching
``...EndCapture`` on one thread; its name is the engine's range around it (``capture_32_DECODE``) where one is
open, else "capture N".
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path

import msgspec

from gpuscope.model.serving import CapturedGraph
from gpuscope.net.deadline import Timeouts
from gpuscope.traces.errors import TraceError
from gpuscope.traces.kineto import read_bytes

_LAUNCH = re.compile(r"^(?:cuda|hip)(?:LaunchKernel|LaunchKernelExC|ExtModuleLaunchKernel|ModuleLaunchKernel)"
                     r"|^cuLaunchKernel")
_BEGIN = re.compile(r"^(?:cuda|hip)StreamBeginCapture|^cuStreamBeginCapture")
_END = re.compile(r"^(?:cuda|hip)StreamEndCapture|^cuStreamEndCapture")
_RANGE = re.compile(r"^capture_|graph_capture|cuda_graph_capture", re.IGNORECASE)


class _Args(msgspec.Struct):
    kernel: str | None = None


class _Event(msgspec.Struct):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    ts: float | None = None
    dur: float | None = None
    tid: int | str | None = None
    args: _Args | None = None


class _File(msgspec.Struct):
    traceEvents: list[_Event] = []  # noqa: N815 - Kineto's key


def read_captures(path: Path | str, *, timeouts: Timeouts | None = None) -> tuple[CapturedGraph, ...]:
    """Every graph captured in the trace at ``path`` (a local path or an fsspec URL, read within ``timeouts``);
    TraceError when it cannot be read or holds no capture."""
    try:
        trace = msgspec.json.decode(read_bytes(path, timeouts=timeouts).tobytes(), type=_File)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceError(path, f"not a profiler trace ({exc})") from None
    events = [e for e in trace.traceEvents if e.ph == "X" and e.name and e.ts is not None]
    graphs = captures(events)
    if not graphs:
        raise TraceError(path, "holds no CUDA/HIP graph capture (no StreamBeginCapture ... EndCapture with kernel "
                               "launches between them): is it a capture trace?")
    return graphs


def captures(events: list[_Event]) -> tuple[CapturedGraph, ...]:
    out: list[CapturedGraph] = []
    by_tid: dict[object, list[_Event]] = {}
    for e in events:
        by_tid.setdefault(e.tid, []).append(e)
    for thread in by_tid.values():
        thread.sort(key=lambda e: e.ts or 0.0)
        ops = [e for e in thread if e.cat in ("cpu_op", "Operator")]
        ranges = [e for e in thread if e.cat == "user_annotation" and _RANGE.search(e.name or "")]
        begin: float | None = None
        for e in thread:
            if e.cat not in ("cuda_runtime", "cuda_driver", "Runtime"):
                continue
            if _BEGIN.match(e.name or ""):
                begin = e.ts
            elif _END.match(e.name or "") and begin is not None:
                graph = _graph(thread, ops, ranges, begin, e.ts or begin, len(out) + 1)
                if graph is not None:
                    out.append(graph)
                begin = None
    return tuple(out)


def _graph(thread: list[_Event], ops: list[_Event], ranges: list[_Event], begin: float, end: float,
           n: int) -> CapturedGraph | None:
    launches = [e for e in thread if e.cat in ("cuda_runtime", "cuda_driver", "Runtime") and begin <= (e.ts or 0) <= end
                and _LAUNCH.match(e.name or "") and e.args is not None and e.args.kernel]
    if not launches:
        return None
    starts = [o.ts or 0.0 for o in ops]
    kernels, operators = [], []
    for launch in launches:
        kernels.append(launch.args.kernel if launch.args is not None and launch.args.kernel else "")
        operators.append(_innermost(ops, starts, launch.ts or 0.0))
    around = [r for r in ranges if (r.ts or 0) <= begin <= (r.ts or 0) + (r.dur or 0)]
    name = max(around, key=lambda r: r.ts or 0).name if around else None
    return CapturedGraph(name=name or f"capture {n}", kernels=tuple(kernels), operators=tuple(operators))


def _innermost(ops: list[_Event], starts: list[float], at: float) -> str | None:
    """The latest-starting operator still open at ``at`` (operators nest: that is the innermost)."""
    i = bisect.bisect_right(starts, at) - 1
    while i >= 0:
        o = ops[i]
        if (o.ts or 0.0) + (o.dur or 0.0) >= at:
            return o.name
        i -= 1
    return None
