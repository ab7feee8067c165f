"""An independent check of the launch-to-start latency and the queue depth in ``--json`` (``ranks[].queue``): both
recomputed from each bundled trace's raw JSON, plainly and slowly (runtime call and GPU event joined on the
correlation id in a dict, the queue walked event by event), and compared with the reports pinned in
tests/api/expected_reports.json.gz, which test_expected_reports.py holds equal to what ``gpuscope analyze --json``
prints now. The traces: every bundled trace file analysed alone (a file case, or a folder of one file) whose host
and GPU clocks agree (``clock_skew_us`` null: else the report leaves the queue out)."""

from __future__ import annotations

import gzip
from collections import defaultdict
from functools import cache
from typing import Any

import msgspec
import numpy as np
import pytest

from tests.api.test_expected_reports import expected
from tests.conftest import ROOT

RUNTIME = {"cuda_runtime", "cuda_driver", "runtime"}
GPU = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
TOLERANCE_US = 0.002
"""Kineto writes µs with up to three decimals; the reader keeps whole ns: a difference of a ns or two at most."""


def single_file_cases() -> list[str]:
    out = []
    for case, report in expected().items():
        path = ROOT / case
        if path.suffix == ".sqlite":  # an Nsight Systems export: no JSON to recompute from (tests/traces/nsys does)
            continue
        files = [path] if path.is_file() else sorted(path.glob("*.json*")) if path.is_dir() else []
        if len(files) == 1 and len(report.get("ranks", ())) == 1:
            out.append(case)
    return sorted(out)


class Args(msgspec.Struct):
    correlation: Any = None
    device: Any = None
    stream: Any = None


class Event(msgspec.Struct):
    """The fields of a Chrome-trace event this check reads (the rest skipped unread)."""

    ph: Any = None
    cat: Any = None
    ts: Any = None
    dur: Any = None
    args: Args | None = None


class Doc(msgspec.Struct):
    traceEvents: list[Event] = []


@cache
def events(case: str) -> list[Event]:
    path = ROOT / case
    file = path if path.is_file() else next(iter(sorted(path.glob("*.json*"))))
    data = file.read_bytes()
    text = gzip.decompress(data) if file.name.endswith(".gz") else data
    found = msgspec.json.decode(text, type=Doc | list[Event])  # type: ignore[arg-type]
    found = found.traceEvents if isinstance(found, Doc) else found
    return [e for e in found if e.ph == "X" and e.args is not None]


def category(event: Event) -> str:
    return str(event.cat or "").lower()


@cache
def launches(case: str) -> list[tuple[Event, Event]]:
    """(runtime call, GPU event) pairs with the same correlation id; the first call of an id where several share it."""
    calls: dict[int, Event] = {}
    for e in events(case):
        if category(e) in RUNTIME and e.args is not None and e.args.correlation is not None:
            calls.setdefault(e.args.correlation, e)
    return [(calls[e.args.correlation], e) for e in events(case)
            if category(e) in GPU and e.args is not None and e.args.correlation in calls]


def latencies_us(case: str) -> list[float]:
    return [max(k.ts - (call.ts + call.dur), 0.0) for call, k in launches(case) if category(k) == "kernel"]


def max_depths(case: str) -> dict[tuple[int, int], tuple[int, int]]:
    """(device, stream) -> (launches, deepest queue): one up at each call's start, one down at each GPU start."""
    changes: dict[tuple[int, int], list[tuple[float, int]]] = defaultdict(list)
    for call, work in launches(case):
        assert work.args is not None
        key = (int(work.args.device), int(work.args.stream))
        changes[key] += [(call.ts, -1), (work.ts, 1)]  # at one time, the launch (sorted first) counts first
    out = {}
    for key, moves in changes.items():
        depth = deepest = 0
        for _, down in sorted(moves):
            depth += -down
            deepest = max(deepest, depth)
        out[key] = (len(moves) // 2, deepest)
    return out


CASES = [c for c in single_file_cases() if expected()[c]["ranks"][0].get("clock_skew_us") is None]


def test_the_check_covers_the_bundled_traces_with_launches() -> None:
    assert len(CASES) >= 20
    assert sum(1 for c in CASES if latencies_us(c)) >= 15


@pytest.mark.parametrize("case", CASES)
def test_launch_to_start_latency_matches_the_raw_json(case: str) -> None:
    raw = latencies_us(case)
    queue = expected()[case]["ranks"][0].get("queue")
    latency = queue["latency"] if queue else None
    if not raw:
        assert latency is None
        return
    assert latency is not None and latency["kernels"] == len(raw)
    p50, p90, p99 = np.percentile(raw, [50, 90, 99])
    assert latency["p50_us"] == pytest.approx(p50, abs=TOLERANCE_US)
    assert latency["p90_us"] == pytest.approx(p90, abs=TOLERANCE_US)
    assert latency["p99_us"] == pytest.approx(p99, abs=TOLERANCE_US)
    assert latency["max_us"] == pytest.approx(max(raw), abs=TOLERANCE_US)
    assert latency["mean_us"] == pytest.approx(sum(raw) / len(raw), abs=TOLERANCE_US)


@pytest.mark.parametrize("case", CASES)
def test_queue_depth_matches_the_raw_json(case: str) -> None:
    raw = max_depths(case)
    queue = expected()[case]["ranks"][0].get("queue")
    streams = queue["streams"] if queue else []
    assert len(streams) + (queue["streams_left_out"] if queue else 0) == len(raw)
    for s in streams:
        assert (s["launches"], s["max_depth"]) == raw[(s["device"], s["stream"])]


def largest_difference_us() -> tuple[float, str]:
    """The largest difference over every checked figure, and where: what docs and notes quote."""
    worst = (0.0, "")
    for case in CASES:
        raw = latencies_us(case)
        latency = (expected()[case]["ranks"][0].get("queue") or {}).get("latency")
        if not raw or latency is None:
            continue
        mine = (latency["p50_us"], latency["p90_us"], latency["p99_us"], latency["max_us"], latency["mean_us"])
        theirs = (*np.percentile(raw, [50, 90, 99]).tolist(), max(raw), sum(raw) / len(raw))
        worst = max(worst, max((abs(a - b), case) for a, b in zip(mine, theirs)))
    return worst


if __name__ == "__main__":  # PYTHONPATH=. python tests/accuracy/test_launch_latency.py
    difference_us, where = largest_difference_us()
    print(f"{len(CASES)} traces; largest difference {difference_us:.6f} µs, in {where}")
