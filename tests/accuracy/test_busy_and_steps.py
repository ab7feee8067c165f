"""GPU busy and step time, recomputed from each trace's raw JSON (the standard library's json, plain Python) and
compared with `gpuscope analyze --json` over every bundled trace (their pinned reports, which
tests/api/test_expected_reports.py holds to this checkout's output).

- A step, as the TensorBoard plugin defines it (docs/diagnosis.md, section 1a): it starts at its ProfilerStep#N's
  start (the host's marker, not the GPU-side copy Kineto writes as ``gpu_user_annotation``) or the previous step's
  end, whichever is later, and ends at its ProfilerStep's end or the end of the last GPU event (kernel, copy,
  memset) launched by a runtime call made inside it (matched on ``args.correlation``), whichever is later. The
  first step, when it launched GPU work, starts after the GPU work launched before it that ended before that work
  began (the plugin's "previous step's end" for the first step). Trailing steps that launched no GPU work, or under
  80% of the step before's, are not kept (the profiler stopped before their GPU work was recorded). In a trace
  without ProfilerStep, a serving engine's step ranges mark the steps (``engine_ranges``), numbered from 0: each
  starts at its range and ends at its range's end or its GPU work's, and only trailing steps that launched none are
  left out (an engine's steps differ from one another).
- The job's step time: the mean over the steady steps of each step's slowest rank.
- GPU busy: |union of kernel, memcpy and memset intervals| over the steady window (the first steady step's start to
  the last step's end), per GPU the rank drove, averaged over them. Without profiler steps the window is the host's
  span (its operators, annotations and Python functions; every event's where it has none) stretched to the end of
  the GPU work launched from inside it (checked where no start-up was cut off it).

Which steps are warm-up is the report's call (start-up detection): the checks take its flags, and check every
step's own time whatever its flag.
"""

from __future__ import annotations

import gzip
import json
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests import reference
from tests.accuracy.engine_ranges import engine_ranges
from tests.conftest import ROOT

PINNED = ROOT / "tests" / "api" / "expected_reports.json.gz"
GPU = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}
"""Kineto's categories of GPU work (older traces capitalise them: Kernel, Memcpy, Memset)."""
RUNTIME = {"cuda_runtime", "cuda_driver", "runtime", "hip_runtime", "xpu_runtime", "xpu_driver",
           "privateuse1_runtime", "privateuse1_driver"}
"""Kineto's categories of the host calls that launch GPU work."""
STEP = "ProfilerStep#"
STEP_US = 0.01
"""Timestamps are µs with three decimals at most: 10 ns covers their reading and rounding."""
BUSY = 1e-5
"""A share of the window: each GPU interval's ends are read to the ns, and a window of a few ms holding some
hundreds of them (mi210_gpu_only: 6.1 ms) moves by tens of ns."""


def _correlation(e: dict[str, Any]) -> int | None:
    value = (e.get("args") or {}).get("correlation")
    return int(value) if isinstance(value, int | float) and value >= 0 else None


def plugin_steps(evs: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Each kept profiler step: its number -> (start, end) in µs, by the plugin's definition above."""
    marks = sorted((e for e in evs if str(e.get("name", "")).startswith(STEP)
                    and str(e.get("cat", "")).lower() != "gpu_user_annotation"), key=lambda e: e["ts"])
    engine = not marks
    if engine:
        marks = [{"name": f"{STEP}{n}", "ts": s, "dur": t - s} for n, (s, t) in enumerate(engine_ranges(evs))]
    if not marks:
        return {}
    launches: dict[int, dict[str, Any]] = {}
    for e in evs:
        if str(e.get("cat", "")).lower() in RUNTIME and (c := _correlation(e)) is not None:
            launches.setdefault(c, e)
    count = [0] * len(marks)
    last_end: list[float | None] = [None] * len(marks)
    first_start: float | None = None
    others: list[float] = []  # the ends of GPU events no step launched
    for e in evs:
        if str(e.get("cat", "")).lower() not in GPU:
            continue
        c = _correlation(e)
        call = launches.get(c) if c is not None else None
        inside = [i for i, m in enumerate(marks) if call is not None and m["ts"] <= call["ts"]]
        if call is None or not inside or call["ts"] + call["dur"] > marks[inside[-1]]["ts"] + marks[inside[-1]]["dur"]:
            others.append(e["ts"] + e["dur"])
            continue
        i = inside[-1]
        count[i] += 1
        end = e["ts"] + e["dur"]
        last_end[i] = end if last_end[i] is None else max(last_end[i] or end, end)
        if i == 0:
            first_start = e["ts"] if first_start is None else min(first_start, e["ts"])
    keep = len(marks)
    if len(marks) > 1 and any(count):
        last = max(i for i, n in enumerate(count) if n)
        keep = last if not engine and last > 0 and count[last - 1] * 0.8 > count[last] else last + 1
    out: dict[str, tuple[float, float]] = {}
    previous = marks[0]["ts"]
    if first_start is not None and not engine:
        previous = max([previous, *(end for end in others if end < first_start)])
    for i, m in enumerate(marks[:keep]):
        start = max(previous, m["ts"])
        end = max(m["ts"] + m["dur"], last_end[i] if last_end[i] is not None else m["ts"])
        out[m["name"].removeprefix(STEP)] = (start, max(end, start))
        previous = max(end, start)
    return out


def gpu_intervals(evs: list[dict[str, Any]]) -> list[list[tuple[float, float]]]:
    """The GPU work's intervals, one list per device (``args.device``)."""
    by_device: dict[Any, list[tuple[float, float]]] = {}
    for e in evs:
        if str(e.get("cat", "")).lower() in GPU:
            by_device.setdefault((e.get("args") or {}).get("device"), []).append((e["ts"], e["ts"] + e["dur"]))
    return list(by_device.values())


def busy_share(devices: list[list[tuple[float, float]]], start: float, end: float) -> float:
    """|union of the GPU intervals in [start, end]| / (end - start), per device, averaged over the devices."""
    shares = [reference.union_us([(max(a, start), min(b, end)) for a, b in spans if b > start and a < end])
              / (end - start) for spans in devices]
    return statistics.fmean(shares) if shares else 0.0


HOST = {"cpu_op", "operator", "user_annotation", "python_function"}
"""Kineto's categories of the host's own work (the old schema's "Operator" among them)."""


def host_window(evs: list[dict[str, Any]]) -> tuple[float, float]:
    """The window of a trace without profiler steps: the host's span, stretched to the end of the GPU work launched
    by the runtime calls inside it."""
    host = [e for e in evs if str(e.get("cat", "")).lower() in HOST] or evs
    start, end = min(e["ts"] for e in host), max(e["ts"] + e["dur"] for e in host)
    calls = {c: e for e in evs if str(e.get("cat", "")).lower() in RUNTIME and (c := _correlation(e)) is not None
             and e["ts"] >= start and e["ts"] + e["dur"] <= end}
    launched = [e["ts"] + e["dur"] for e in evs if str(e.get("cat", "")).lower() in GPU and _correlation(e) in calls]
    return start, max([end, *launched])


@dataclass(frozen=True)
class Recount:
    """What one trace file's raw events say: its steps, its GPU intervals by device, its window without steps."""

    steps: dict[str, tuple[float, float]]
    gpu: list[list[tuple[float, float]]]
    window: tuple[float, float]


class _Args(msgspec.Struct):
    correlation: Any = None
    device: Any = None


class _Event(msgspec.Struct):
    ph: Any = None
    name: Any = None
    cat: Any = None
    ts: Any = None
    dur: Any = None
    args: _Args | None = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Event]


def events(path: Path) -> list[dict[str, Any]]:
    """The complete ("X") events of a trace file with the fields these checks read: phase, name, category, start,
    duration and the correlation and device of ``args`` (the JSON parsed by msgspec into these few fields, for
    speed; nothing of gpuscope's reader)."""
    raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    try:
        doc = msgspec.json.decode(raw, type=_Trace)
    except msgspec.ValidationError:  # a trace that is the list of events alone
        doc = _Trace(traceEvents=msgspec.json.decode(raw, type=list[_Event]))
    return [{"name": e.name, "cat": e.cat, "ts": e.ts, "dur": e.dur,
             "args": {"correlation": e.args.correlation, "device": e.args.device} if e.args is not None else {}}
            for e in doc.traceEvents if e.ph == "X" and isinstance(e.dur, int | float)
            and isinstance(e.ts, int | float)]


@cache
def recount(path: Path) -> Recount:
    """The trace file read once (a folder's case and its files' cases share it)."""
    evs = events(path)
    return Recount(steps=plugin_steps(evs), gpu=gpu_intervals(evs), window=host_window(evs))


@cache
def pinned() -> dict[str, Any]:
    with gzip.open(PINNED, "rt") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def rank_files(case: str) -> dict[str, Path]:
    """The trace files of a pinned case by file name (the ranks' ``source``)."""
    path = ROOT / case
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")))
    return {f.name: f for f in files}


def check(report: dict[str, Any], files: dict[str, Path]) -> dict[str, float]:
    """The largest difference of each figure between ``report`` and the recomputation from ``files``: per-step
    times (µs), the job's step time (relative), each rank's GPU busy (points of the window)."""
    worst = {"step_us": 0.0, "step_time": 0.0, "gpu_busy": 0.0}
    job: dict[str, float] = {}
    warm: set[str] = set()
    for rank in report["ranks"]:
        source = Path(rank.get("source") or "").name
        if source not in files:
            continue
        raw = recount(files[source])
        ours = rank.get("per_step") or []
        if not ours:  # no profiler steps: the host's window, where no start-up was cut off it
            if rank.get("startup") is None and rank.get("gpu_busy") is not None:
                start, end = raw.window
                worst["window_us"] = max(worst.get("window_us", 0.0), abs(rank["window_us"] - (end - start)))
                worst["gpu_busy"] = max(worst["gpu_busy"], abs(rank["gpu_busy"] - busy_share(raw.gpu, start, end)))
            continue
        steps = raw.steps
        assert [s["name"] for s in ours] == list(steps)[:len(ours)], source
        for s in ours:
            start, end = steps[s["name"]]
            worst["step_us"] = max(worst["step_us"], abs(s["duration_us"] - (end - start)))
            job[s["name"]] = max(job.get(s["name"], 0.0), end - start)
            if s["warmup"]:
                warm.add(s["name"])
        steady = [n for n in list(steps)[:len(ours)] if n not in {s["name"] for s in ours if s["warmup"]}]
        start, end = (steps[steady[0]][0], steps[list(steps)[len(ours) - 1]][1]) if steady else (0.0, 0.0)
        if rank.get("gpu_busy") is not None and end > start:
            worst["gpu_busy"] = max(worst["gpu_busy"], abs(rank["gpu_busy"] - busy_share(raw.gpu, start, end)))
    times = [t for name, t in job.items() if name not in warm]
    step = (report.get("facts") or {}).get("step_time_us")
    if times and step is not None:
        worst["step_time"] = abs(step / statistics.fmean(times) - 1)
    return worst


def cases() -> list[str]:
    """Every pinned report of a bundled trace with a rank."""
    # an Nsight Systems export has no JSON: tests/traces/nsys/test_real.py checks it against its own tables
    return [case for case, report in pinned().items() if report.get("ranks") and (ROOT / case).exists()
            and not case.endswith(".sqlite") and any(rank_files(case))]


@pytest.mark.parametrize("case", cases())
def test_step_times_and_gpu_busy_match_a_recount_from_the_raw_events(case: str) -> None:
    worst = check(pinned()[case], rank_files(case))
    assert worst["step_us"] <= STEP_US, worst
    assert worst["step_time"] <= 1e-6, worst
    assert worst["gpu_busy"] <= BUSY, worst
    assert worst.get("window_us", 0.0) <= STEP_US, worst
