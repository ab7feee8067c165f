"""Reference computations straight from a trace's JSON, with nothing of gpuscope's reader or analyzers: the
independent side of tests that check gpuscope's figures on real traces."""

from __future__ import annotations

import gzip
import io
import json
import math
import pickle
from pathlib import Path
from typing import Any

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def events(path: Path) -> list[dict[str, Any]]:
    """The complete ("X") events of a Kineto trace file (.json or .json.gz)."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    doc = json.loads(raw)
    items = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in items if e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))]


def union_us(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of [start, end) intervals."""
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


def gpu_busy_over_steps(path: Path) -> float:
    """|union of GPU kernel, memcpy and memset intervals| over the profiler steps' span, where that span runs from
    the first step's start to the last step's end or the end of the last GPU work started inside it."""
    evs = events(path)
    steps = [e for e in evs if str(e.get("name", "")).startswith("ProfilerStep#")]
    start = min(e["ts"] for e in steps)
    step_end = max(e["ts"] + e["dur"] for e in steps)
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in evs if e.get("cat") in GPU_CATEGORIES]
    end = max([step_end] + [b for a, b in gpu if start <= a < step_end])
    clipped = [(max(a, start), min(b, end)) for a, b in gpu if b > start and a < end]
    return union_us(clipped) / (end - start)


def nccl_kernel_us(path: Path) -> float:
    """Time in NCCL kernels (every naming era), summed."""
    return sum(e["dur"] for e in events(path) if e.get("cat") in GPU_CATEGORIES
               and str(e.get("name", "")).startswith(("ncclKernel", "ncclDevKernel", "ncclKernel_")))


_GEMMS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1), "aten::baddbmm": (1, 2)}


def leaf_gemm_flops_per_step(path: Path) -> float:
    """FLOPs of the leaf GEMM calls (mm, addmm, bmm, baddbmm with no GEMM call inside them on their thread) inside
    the ProfilerStep spans, from their ``Input Dims`` alone, per step: 2 x m x k x n (x batch)."""
    evs = events(path)
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in evs if str(e.get("name", "")).startswith("ProfilerStep#")]
    gemms = [e for e in evs if e.get("name") in _GEMMS and (e.get("args") or {}).get("Input Dims")]
    total = 0.0
    for e in gemms:
        start, end = e["ts"], e["ts"] + e["dur"]
        if not any(s <= start < t for s, t in steps):
            continue
        if any(o is not e and o.get("tid") == e.get("tid") and start <= o["ts"] and o["ts"] + o["dur"] <= end
               for o in gemms):
            continue  # not a leaf: the GEMM inside it is counted
        a, b = (e["args"]["Input Dims"][i] for i in _GEMMS[e["name"]])
        batch = a[0] if len(a) == 3 else 1
        total += 2.0 * batch * a[-2] * a[-1] * b[-1]
    return total / len(steps)


class _PlainOnly(pickle.Unpickler):
    """The standard library's unpickler with every global refused: plain data only (the documented way)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name} refused")


def snapshot(path: Path) -> dict[str, Any]:
    """A PyTorch memory snapshot (.pickle, or gzipped) as the dict ``torch.cuda.memory._snapshot`` returned."""
    raw = path.read_bytes()
    raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    doc = _PlainOnly(io.BytesIO(raw)).load()
    assert isinstance(doc, dict)
    return doc


def python_frames(entry: dict[str, Any], depth: int) -> tuple[tuple[str, str, int], ...]:
    """An action's Python frames (innermost first, at most ``depth``) as (name, file, line)."""
    return tuple((f["name"], f["filename"], f["line"]) for f in entry.get("frames", ())
                 if ".py" in f["filename"])[:depth]


def snapshot_replay(doc: dict[str, Any], device: int = 0) -> dict[str, Any]:
    """A device's allocated bytes replayed from its raw actions: "alloc" adds its size, "free_requested" takes it
    away (the allocator's allocated_bytes), starting from what the segments' allocated blocks request at the end
    less the trace's net allocations. Returns the start, the peak, the action after which it was first reached,
    the allocations made in the trace live then (address -> action), the blocks made before the trace and live
    all through it (allocated at the end, never made in it), and the bytes live at the peak that were made before
    the trace with no frames to name them."""
    trace = doc["device_traces"][device]
    blocks = [b for s in doc["segments"] if s["device"] == device for b in s["blocks"]]
    net = sum(e["size"] for e in trace if e["action"] == "alloc") - \
        sum(e["size"] for e in trace if e["action"] == "free_requested")
    start = sum(b.get("requested_size", b["size"]) for b in blocks if b["state"] == "active_allocated") - net
    total, peak, peak_at = start, start, -1
    live: dict[int, dict[str, Any]] = {}
    live_at_peak: dict[int, dict[str, Any]] = {}
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            total += e["size"]
            live[e["addr"]] = e
        elif e["action"] == "free_requested":
            total -= e["size"]
            live.pop(e["addr"], None)
        if total > peak:
            peak, peak_at, live_at_peak = total, i, dict(live)
    kept = [b for b in blocks if b["state"] == "active_allocated" and b["address"] not in live]
    framed = sum(b.get("requested_size", b["size"]) for b in kept if b.get("frames"))
    return {"start": start, "peak": peak, "peak_at": peak_at, "live": live_at_peak, "blocks_before": kept,
            "before": peak - sum(e["size"] for e in live_at_peak.values()) - framed}


def memory_events(path: Path, device_types: tuple[int, ...] = (1, 6)) -> list[dict[str, Any]]:
    """The ``[memory]`` events of a trace file on a GPU (by device type), in time order (the file's order on a
    tie)."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    doc = json.loads(raw)
    items = doc["traceEvents"] if isinstance(doc, dict) else doc
    found = [e for e in items if e.get("name") == "[memory]" and e.get("ph") == "i"
             and (e.get("args") or {}).get("Device Type") in device_types]
    return sorted(found, key=lambda e: e["ts"])


def trace_memory_replay(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The largest "Total Allocated" of one device's memory events, the event that first reached it, and the bytes
    live then that the trace allocated (paired with their frees by "Addr")."""
    totals = [e["args"]["Total Allocated"] for e in events]
    peak_at = totals.index(max(totals))
    live: dict[int, int] = {}
    for e in events[:peak_at + 1]:
        size, addr = e["args"]["Bytes"], e["args"]["Addr"]
        if size > 0:
            live[addr] = size
        else:
            live.pop(addr, None)
    return {"peak": totals[peak_at], "peak_at": peak_at, "live_made_in_trace": sum(live.values())}


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def slow_threshold_us(durations_us: list[float]) -> float | None:
    """median + max(3.5 x 1.4826 x MAD, 25% of the median), as docs/diagnosis.md states it; None under 3 steps."""
    if len(durations_us) < 3:
        return None
    median = _median(durations_us)
    mad = _median([abs(d - median) for d in durations_us])
    return median + max(3.5 * (1.4826 * mad), 0.25 * median)


def slow_steps(durations_us: list[float]) -> tuple[int | None, list[int], list[int], int | None]:
    """(period, its slow steps, other slow steps that recur, the lone slow step) by the rule docs/diagnosis.md
    states, step by step: the shortest period p from 2 to 32 at which the steps of exactly one phase (3 of them at
    least) are each slower than the threshold of the other steps, where fewer than 1% of the ways to place that
    many slow steps among the steps are such a pattern (one phase of some period from 2 to 32); then, among the
    other steps, those past their threshold: two or more recur, exactly one is the lone one."""
    n = len(durations_us)
    periodic: list[int] = []
    period = None
    for p in range(2, min(32, n // 3) + 1):
        slow_phases = []
        for phase in range(p):
            idx = list(range(phase, n, p))
            if len(idx) < 3:
                continue
            limit = slow_threshold_us([d for i, d in enumerate(durations_us) if i % p != phase])
            if limit is not None and all(durations_us[i] > limit for i in idx):
                slow_phases.append(idx)
        if len(slow_phases) == 1:
            k = len(slow_phases[0])
            patterns = sum(1 for q in range(2, 33) for phase in range(q) if len(range(phase, n, q)) == k)
            if patterns / math.comb(n, k) < 0.01:
                period, periodic = p, slow_phases[0]
                break
    rest = [i for i in range(n) if i not in periodic]
    limit = slow_threshold_us([durations_us[i] for i in rest])
    past = [i for i in rest if limit is not None and durations_us[i] > limit]
    return period, periodic, past if len(past) > 1 else [], past[0] if len(past) == 1 else None


def typical_steps_us(durations_us: list[float]) -> list[float]:
    """The typical steps (the ones the stage shares are taken over): every step but the lone slow one."""
    lone = slow_steps(durations_us)[3]
    return [d for i, d in enumerate(durations_us) if i != lone]


