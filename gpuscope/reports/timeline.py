"""One step (a profiler step, or a serving engine's) as a small trace to open in Perfetto (ui.perfetto.dev) or
chrome://tracing.

A Chrome-trace JSON document of the rank's complete events that ran during the step's window (each event
that overlaps it, whole), written the way Kineto writes them (categories, ``pid`` a process or a GPU, ``tid`` a
thread or a stream, the args that join launches to kernels), plus the metadata events that name the processes
and threads, so gpuscope reads it back as it reads any trace. Left out: the ``ProfilerStep`` markers of other steps
(all of them, for a step an engine's or the user's range marks), events of categories gpuscope does not read,
memory and flow events.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace.step_pick import StepWindow, slowest_rank_windows
from gpuscope.model.errors import analysis_stage
from gpuscope.model.trace import GPU_KINDS, Kind, RankTrace, source_of

CATEGORIES = {Kind.KERNEL: "kernel", Kind.MEMCPY: "gpu_memcpy", Kind.MEMSET: "gpu_memset",
              Kind.RUNTIME: "cuda_runtime", Kind.CPU_OP: "cpu_op", Kind.USER_ANNOTATION: "user_annotation",
              Kind.PYTHON: "python_function", Kind.GPU_ANNOTATION: "gpu_user_annotation",
              Kind.STEP: "user_annotation"}
"""Each kind as Kineto names its category (what gpuscope's reader maps back to the same kind)."""
_encoder = msgspec.json.Encoder()


def in_window(trace: RankTrace, step: StepWindow) -> npt.NDArray[np.bool_]:
    """The events of ``trace`` the step's file holds: those of a known kind that overlap its window (an instant
    one inside it), but no other step's ``ProfilerStep`` marker."""
    ev = trace.events
    known = ev.kind != Kind.OTHER
    overlaps = (ev.ts_ns < step.end_ns) & ((ev.end_ns > step.start_ns) | (ev.ts_ns >= step.start_ns))
    marker = f"ProfilerStep#{step.name}" if step.source == "ProfilerStep" else None
    others = trace.name_mask(lambda name: name != marker, Kind.STEP)
    return np.asarray(known & overlaps & ~others, dtype=bool)


def step_trace(trace: RankTrace, step: StepWindow) -> dict[str, Any]:
    """The Chrome-trace document of ``step``."""
    ev = trace.events
    picked = np.flatnonzero(in_window(trace, step))
    devices = set(ev.device[picked][ev.device[picked] >= 0].tolist())
    host_pid = trace.pid if trace.pid is not None and trace.pid not in devices else max(devices, default=0) + 1000
    host_tids = _host_tids(ev.tid[picked][~np.isin(ev.kind[picked], GPU_KINDS)])
    events = [_event(trace, int(i), host_pid, host_tids) for i in picked.tolist()]
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "displayTimeUnit": "ms",
        "traceEvents": _metadata(trace, host_pid, host_tids, events) + events,
        "distributedInfo": {"rank": trace.rank},
        "gpuscope": {"rank": trace.rank, "step": step.name, "step_source": step.source, "why": list(step.why),
                     "window_start_us": _us(step.start_ns), "window_end_us": _us(step.end_ns),
                     "source": trace.source},
    }
    if trace.gpus:
        doc["deviceProperties"] = [{"id": g.index, "name": g.name, "totalGlobalMem": g.memory_bytes}
                                   for g in trace.gpus]
    return doc


@analysis_stage("the step trace", source_of)
def step_trace_bytes(trace: RankTrace, step: StepWindow, *, compress: bool = False) -> bytes:
    """The document as JSON bytes (gzipped with ``compress``: Perfetto and chrome://tracing open both)."""
    data = _encoder.encode(step_trace(trace, step))
    return gzip.compress(data, mtime=0) if compress else data


def file_name(label: str, step: StepWindow, *, compress: bool = False) -> str:
    """``<label>.rank<r>.step<name>.<why>.json[.gz]``, from characters safe in any file system."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in label)[:80] or "trace"
    name = "".join(c if c.isalnum() else "_" for c in step.name)[:40]
    return f"{safe}.rank{step.rank}.step{name}.{'-'.join(step.why)}.json" + (".gz" if compress else "")


def _us(ns: int) -> int | float:
    """Kineto's µs: whole where the trace had whole µs, else with its nanoseconds."""
    return ns // 1000 if ns % 1000 == 0 else ns / 1000


def _host_tids(tids: npt.NDArray[np.int64]) -> dict[int, int]:
    """Host thread ids as written: the trace's own numbers; threads it named rather than numbered (the reader
    gives those negative ids) get numbers after the largest."""
    numbered = {t for t in tids.tolist() if t >= 0}
    named = sorted({t for t in tids.tolist() if t < 0}, reverse=True)
    first = max(numbered, default=0) + 1
    return {t: t for t in numbered} | {t: first + i for i, t in enumerate(named)}


def _event(trace: RankTrace, i: int, host_pid: int, host_tids: dict[int, int]) -> dict[str, Any]:
    ev = trace.events
    kind = Kind(int(ev.kind[i]))
    args: dict[str, Any] = {}
    for key, value in (("correlation", ev.correlation[i]), ("External id", ev.external_id[i])):
        if value >= 0:
            args[key] = int(value)
    if kind in GPU_KINDS:
        pid, tid = int(ev.device[i]), int(ev.stream[i])
        args |= {"device": pid, "stream": tid}
        if ev.bytes[i] >= 0:
            args["bytes"] = int(ev.bytes[i])
        for key, value in (("blocks per SM", ev.blocks_per_sm[i]), ("warps per SM", ev.warps_per_sm[i])):
            if not math.isnan(float(value)):
                args[key] = float(value)
    else:
        pid, tid = host_pid, host_tids[int(ev.tid[i])]
    return {"ph": "X", "cat": CATEGORIES[kind], "name": trace.names[ev.name_id[i]], "pid": pid, "tid": tid,
            "ts": _us(int(ev.ts_ns[i])), "dur": _us(int(ev.dur_ns[i])), "args": args}


def _metadata(trace: RankTrace, host_pid: int, host_tids: dict[int, int],
              events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """process_name / thread_name events, and the order Perfetto lists them in: the host, then each GPU."""
    threads = sorted({(e["pid"], e["tid"]) for e in events})
    out: list[dict[str, Any]] = []
    for pid in sorted({p for p, _ in threads}):
        name = f"rank {trace.rank} host" + (f" (pid {trace.pid})" if trace.pid is not None else "") \
            if pid == host_pid else f"GPU {pid}"
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                    "args": {"sort_index": -1 if pid == host_pid else pid}})
    for pid, tid in threads:
        name = f"stream {tid}" if pid != host_pid else f"thread {tid}"
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
    return out


@dataclass(frozen=True)
class StepFile:
    """A step trace, written: what a report or the dashboard offers to download."""

    step: StepWindow
    file_name: str
    data: bytes
    """The gzipped document."""


def report_step_files(traces: Sequence[RankTrace], label: str) -> tuple[StepFile, ...]:
    """The slowest and the median step of the rank with the job's slowest step, gzipped."""
    chosen = slowest_rank_windows(traces)
    if chosen is None:
        return ()
    trace, windows = chosen
    return tuple(StepFile(step=w, file_name=file_name(label, w, compress=True),
                          data=step_trace_bytes(trace, w, compress=True)) for w in windows)
