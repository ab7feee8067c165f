"""Launch-to-start latency, queue depth per stream and the GPU-side wait (``analyzers.trace.queue``), on traces built
by hand: every figure below is counted from the event list in the comments, not from the code."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import gpuscope
from gpuscope.analyzers.diagnosis.verdict import STALL_MIN
from gpuscope.analyzers.trace import breakdown, queue
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.model.rank import RankReport
from gpuscope.reports.terminal import render
from gpuscope.traces import read_trace
from tests import builders as b
from tests.conftest import SAMPLES

VLLM_DECODE = SAMPLES / "serving" / "vllm_decode_graph_replay.json.gz"


def queued_and_late() -> list[b.Event]:
    """One 1000 µs step; five kernels on stream 7 (times in µs):

    launch 10-15   -> K1 20-120    latency 5     gap 0-20: the host launched at 10 (host wait 20)
    launch 30-35   -> K2 400-450   latency 365   gap 120-400: K2 and K3 queued since 35, 40 (GPU-side 280)
    launch 36-40   -> K3 450-500   latency 410
    launch 600-605 -> K4 610-700   latency 5     gap 500-610: launched at 600, queued 5 µs only (host wait 110)
    launch 650-655 -> K5 800-900   latency 145   gap 700-800: K5 queued since 655 (GPU-side 100: the least that is)
                                                 gap 900-1000: nothing follows (other 100)
    """
    return [b.step(0, 0, 1000),
            b.launch(10, 5, 1), b.kernel("k1", 20, 100, 1),
            b.launch(30, 5, 2), b.kernel("k2", 400, 50, 2),
            b.launch(36, 4, 3), b.kernel("k3", 450, 50, 3),
            b.launch(600, 5, 4), b.kernel("k4", 610, 90, 4),
            b.launch(650, 5, 5), b.kernel("k5", 800, 100, 5)]


def rank_of(tmp_path: Path, events: list[b.Event], name: str = "t") -> RankReport:
    return analyze_rank(read_trace(b.write(tmp_path / f"{name}.json", b.trace(events))))


def test_the_idle_breakdown_tells_the_gpu_side_wait_from_the_host_wait(tmp_path: Path) -> None:
    i = rank_of(tmp_path, queued_and_late()).idle_breakdown_us
    assert i is not None
    assert (i.gpu_side_wait, i.host_wait, i.kernel_wait, i.other) == pytest.approx((380, 130, 0, 100))


def test_launch_to_start_latency_by_hand(tmp_path: Path) -> None:
    q = rank_of(tmp_path, queued_and_late()).queue
    assert q is not None and q.latency is not None
    lat = q.latency
    by_hand = [5, 365, 410, 5, 145]
    assert (lat.kernels, lat.graph_kernels) == (5, 0)
    assert (lat.p50_us, lat.max_us, lat.mean_us) == pytest.approx((145, 410, 186))
    assert (lat.p90_us, lat.p99_us) == pytest.approx(tuple(np.percentile(by_hand, [90, 99])))


def test_queue_depth_of_the_stream_by_hand(tmp_path: Path) -> None:
    # +1 at 10, -1 at 20, +1 at 30, +1 at 36, -1 at 400, -1 at 450, +1 at 600, -1 at 610, +1 at 650, -1 at 800:
    # depths 1 0 1 2 1 0 1 0 1 0 (HTA's mean 0.7); held 10 6 364 50 10 150 µs at depth 1 1 2 1 1 1 over 10-800.
    q = rank_of(tmp_path, queued_and_late()).queue
    assert q is not None and len(q.streams) == 1
    s = q.streams[0]
    assert (s.device, s.stream, s.launches, s.max_depth) == (0, 7, 5, 2)
    assert s.mean_depth == pytest.approx(0.7)
    assert s.time_mean_depth == pytest.approx((10 + 6 + 2 * 364 + 50 + 10 + 150) / 790)


def test_a_short_queued_gap_is_the_gpus_own_turnaround_a_long_one_its_wait(tmp_path: Path) -> None:
    # K2 launched at 6-8, queued through the 20 µs gap 100-120: under 30 µs, HTA's kernel wait; so is the 10 µs
    # before K1, launched at 0 when the step opened.
    events = [b.step(0, 0, 200), b.launch(0, 5, 1), b.kernel("k1", 10, 90, 1), b.launch(6, 2, 2),
              b.kernel("k2", 120, 80, 2)]
    i = rank_of(tmp_path, events).idle_breakdown_us
    assert i is not None
    assert (i.gpu_side_wait, i.kernel_wait) == pytest.approx((0, 10 + 20))
    # Queued 60 µs (K2 from 160): under the 100 µs a launch never takes, HTA's other; 100 µs (from 200): GPU-side.
    for start, side, other in ((160, 0, 60), (200, 100, 0)):
        shifted = [*events[:-1], b.kernel("k2", start, 80, 2)]
        j = rank_of(tmp_path, shifted, f"at{start}").idle_breakdown_us
        assert j is not None and (j.gpu_side_wait, j.other) == pytest.approx((side, other))


def test_work_no_recorded_call_launched_in_a_silent_gap_is_the_gpus_side(tmp_path: Path) -> None:
    # K2 has a correlation id no runtime call carries; the host records nothing from 100 to 600: GPU-side 500.
    silent = [b.step(0, 0, 1000), b.cpu_op("aten::mm", 0, 50), b.launch(10, 5, 1), b.kernel("k1", 20, 80, 1),
              b.kernel("k2", 600, 100, 99)]
    i = rank_of(tmp_path, silent, "silent").idle_breakdown_us
    assert i is not None and i.gpu_side_wait == pytest.approx(500)
    # The host busy in the gap (an operator from 300 to 310): no GPU-side wait, the gap is HTA's other.
    busy = [*silent, b.cpu_op("aten::add", 300, 10)]
    j = rank_of(tmp_path, busy).idle_breakdown_us
    assert j is not None and j.gpu_side_wait == 0 and j.other == pytest.approx(500 + 300)


def test_the_one_call_that_fills_the_window_is_named_while_the_gpu_idles(tmp_path: Path) -> None:
    # A blocking copy call from 60 to 900 µs of a 1000 µs step; the GPU busy 10 µs of it (the copy, 880-890).
    events = [b.step(0, 0, 1000), b.launch(0, 5, 1), b.kernel("k1", 10, 50, 1),
              b.launch(60, 840, 2, name="cudaMemcpy"), b.memcpy(880, 10, 2)]
    call = rank_of(tmp_path, events, "idle").filling_call
    assert call is not None and call.name == "cudaMemcpy"
    assert (call.duration_us, call.share, call.gpu_busy) == pytest.approx((840, 0.84, 10 / 840))
    # The same call while a kernel runs 100-850: a host waiting for a working GPU, not named.
    working = [*events, b.launch(70, 5, 3), b.kernel("k2", 100, 750, 3)]
    assert rank_of(tmp_path, working).filling_call is None


def test_the_gpu_side_wait_is_idle_time_the_host_is_not_blamed_for(tmp_path: Path) -> None:
    # The host sits in an annotation for the whole step: the GPU-side wait (380 µs) is left out of the GPU idle
    # time the host ranges are scored on (130 + 100 µs remain), so the annotation covers all of those.
    events = [*queued_and_late(), b.cpu_op("engine.wait", 0, 1000, cat="user_annotation")]
    trace = read_trace(b.write(tmp_path / "t.json", b.trace(events)))
    start = int(trace.events.ts_ns.min())
    assert queue.gpu_side_wait(trace, breakdown.roles(trace).gpu_any, start, start + 1_000_000).total == 380_000
    wait = next(w for w in analyze_rank(trace).host_in_gpu_idle if w.name == "engine.wait")
    assert wait.idle_us == pytest.approx(230) and wait.share == pytest.approx(1.0)


def test_the_vllm_decode_trace_is_not_host_bound_and_the_verdict_names_the_gpu_side_wait() -> None:
    # The first GPU work (a copy) is enqueued by a hipMemcpyAsync ending 544.7 µs into the trace and starts only at
    # 8,370.9 µs; the host records nothing after 2.4 ms. Read straight from the JSON:
    doc = json.loads(gzip.decompress(VLLM_DECODE.read_bytes()))
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    t0 = min(e["ts"] for e in events)
    first_gpu = min((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")), key=lambda e: e["ts"])
    call = next(e for e in events if e.get("cat") == "cuda_runtime"
                and e["args"].get("correlation") == first_gpu["args"]["correlation"])
    queued_us = first_gpu["ts"] - (call["ts"] + call["dur"])
    report = gpuscope.analyze(VLLM_DECODE, save=False).analysis
    v = report.verdict
    assert v.primary == "idle" and "GPU-side wait" in v.summary and "waits for the CPU" not in v.summary
    assert (v.evidence["host_overhead_share"] or 0.0) < STALL_MIN
    codes = {f.code for f in report.findings}
    assert "gpu_side_wait" in codes and "host_wait_idle" not in codes
    i = report.ranks[0].idle_breakdown_us
    assert i is not None and i.gpu_side_wait is not None
    assert i.gpu_side_wait >= queued_us and i.host_wait == pytest.approx(call["ts"] + call["dur"] - t0, abs=0.01)


def test_the_terminal_shows_the_queue_where_the_gpu_side_wait_matters() -> None:
    report = gpuscope.analyze(VLLM_DECODE, save=False).analysis
    out = io.StringIO()
    render(report, Console(file=out, width=200))
    text = " ".join(out.getvalue().split())
    assert "GPU-side wait 7.8 ms, host wait 545 µs" in text
    assert "launch-to-start latency p50" in text and "deepest queue: 434 launched, not started" in text
    shown = report.ranks[0].queue
    assert shown is not None and max(s.max_depth for s in shown.streams) == 434
