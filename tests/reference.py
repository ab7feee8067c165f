"""Reference computations straight from a trace's JSON, with nothing of gpuscope's reader or analyzers: the
independent side of tests that check gpuscope's figures on real traces."""

from __future__ import annotations

import gzip
import json
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


def typical_steps_us(durations_us: list[float]) -> list[float]:
    """The steps a job's step time is the mean of, by the rule docs/diagnosis.md states: a step longer than
    median + max(3.5 x 1.4826 x MAD, 25% of the median) is an outlier (none with fewer than 3 steps)."""
    if len(durations_us) < 3:
        return list(durations_us)
    ordered = sorted(durations_us)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    deviations = sorted(abs(d - median) for d in durations_us)
    mad = deviations[mid] if len(deviations) % 2 else (deviations[mid - 1] + deviations[mid]) / 2
    threshold = median + max(3.5 * (1.4826 * mad), 0.25 * median)
    return [d for d in durations_us if d <= threshold]
