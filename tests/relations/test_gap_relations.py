"""Relations the GPU-side wait, the launch queue and the engine steps must keep on real traces, where no one knows
the right figures: transform a bundled trace's JSON in a way whose effect is known, read it again, and check the
answer moves exactly so.

- Every GPU event k µs later (the host unchanged): in each gap of the GPU's work with GPU-side wait, k µs more of it
  (up to the whole gap) is GPU-side and k µs less the host's; no gap's GPU-side wait shrinks and no gap's host time
  grows; each kernel's launch-to-start latency grows by k (one that started before its call returned by up to k);
  no stream's queue gets shorter, and once the delay passes the whole trace every launch is queued together.
- Every event (host and GPU) moved by the same time: nothing changes.
- An engine's step range renamed and named with ``--step-range``: the same steps.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpuscope
from gpuscope.analyzers.trace import breakdown, gpu, queue
from gpuscope.analyzers.trace.intervals import Intervals, subtract
from gpuscope.analyzers.trace.steps import find_steps, launched_gpu_events
from gpuscope.model.codec import to_json
from gpuscope.model.trace import GPU_KINDS, RankTrace
from gpuscope.traces import read_trace
from tests.conftest import SAMPLES

TRACES = ("serving/vllm_decode_graph_replay.json.gz", "serving/sglang_qwen3_8b_decode.json.gz",
          "dev/sampled_rank-0.json.gz", "h200/mlp_item_syncs/rank0.1796401738428453619.pt.trace.json.gz")
"""Small bundled traces with GPU-side waits (the first three) and without (a training loop with .item() syncs)."""
WAITING = TRACES[:3]
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}
K_US = 150
"""A delay past the 100 µs a queued wait needs to be the GPU's side (``queue.QUEUED_MIN_NS``)."""


@cache
def raw(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress((SAMPLES / name).read_bytes()))
    return doc


def moved(name: str, tmp_path: Path, *, gpu_us: float = 0, all_us: float = 0) -> Path:
    """The trace with its GPU events ``gpu_us`` later and every event ``all_us`` later."""
    doc = json.loads(json.dumps(raw(name)))
    for e in doc["traceEvents"]:
        if "ts" in e and e.get("ph") in ("X", "i", "I"):
            e["ts"] += all_us + (gpu_us if str(e.get("cat", "")).lower() in GPU_CATEGORIES else 0)
    path = tmp_path / f"{gpu_us}_{all_us}_{Path(name).name}"
    path.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))
    return path


def gaps_in(trace: RankTrace, start_ns: int, end_ns: int) -> Intervals:
    window = Intervals(np.array([start_ns], np.int64), np.array([end_ns], np.int64))
    return subtract(window, breakdown.roles(trace).gpu_any)


def launched_closer(trace: RankTrace, gaps: Intervals) -> np.ndarray:
    """Whether each gap is closed by GPU work a recorded call launched."""
    ev = trace.events
    gpu_idx = np.flatnonzero(ev.mask(*GPU_KINDS))
    _, dev = launched_gpu_events(trace)
    nxt = np.searchsorted(ev.ts_ns[gpu_idx], gaps.ends)
    ok = nxt < gpu_idx.size
    out = np.zeros(len(gaps), dtype=bool)
    out[ok] = np.isin(gpu_idx[nxt[ok]], dev)
    return out


@pytest.mark.parametrize("name", TRACES)
def test_delaying_the_gpu_moves_each_gaps_time_from_the_host_to_the_gpu_side(name: str, tmp_path: Path) -> None:
    before = read_trace(SAMPLES / name)
    after = read_trace(moved(name, tmp_path, gpu_us=K_US))
    k = K_US * 1000
    start, end = int(before.events.ts_ns.min()), int(before.events.end_ns.max()) + k  # one window for both
    gpu_start = int(before.events.ts_ns[before.events.mask(*GPU_KINDS)].min())
    g0, g1 = gaps_in(before, start, end), gaps_in(after, start, end)
    inner0 = (g0.starts >= gpu_start) & (g0.ends < end - k)  # gaps between GPU work; the same gaps k µs later
    inner1 = (g1.starts >= gpu_start + k) & (g1.ends < end)
    assert np.array_equal(g0.starts[inner0] + k, g1.starts[inner1])
    assert np.array_equal(g0.ends[inner0] + k, g1.ends[inner1])
    all0, all1 = queue.side_wait_in(before, g0).per_gap_ns, queue.side_wait_in(after, g1).per_gap_ns
    side0, side1 = all0[inner0], all1[inner1]
    length = (g0.ends - g0.starts)[inner0]
    waited = (side0 > 0) & launched_closer(before, g0)[inner0]
    assert np.array_equal(side1[waited], np.minimum(length[waited], side0[waited] + k))
    assert (side1 >= side0).all()
    # The gap before the first GPU work grows by k, all of it queued where work was queued before.
    lead = g0.ends[0] == gpu_start and g0.starts[0] == start and all0[0] > 0 and launched_closer(before, g0)[0]
    if lead:
        assert g1.ends[0] == gpu_start + k and all1[0] == all0[0] + k
    assert waited.any() or lead or name not in WAITING, "the relation is tested on gaps with a GPU-side wait"
    b, a = gpu.idle_breakdown(before, breakdown.roles(before), start, end), \
        gpu.idle_breakdown(after, breakdown.roles(after), start, end)
    assert b is not None and a is not None and b.gpu_side_wait is not None and a.gpu_side_wait is not None
    assert a.host_wait <= b.host_wait + 1e-6 and a.gpu_side_wait >= b.gpu_side_wait - 1e-6
    idle_b = b.host_wait + b.kernel_wait + b.other + b.gpu_side_wait
    idle_a = a.host_wait + a.kernel_wait + a.other + a.gpu_side_wait
    assert idle_a == pytest.approx(idle_b, abs=1e-3)  # the same window, the same GPU busy time


@pytest.mark.parametrize("name", TRACES)
def test_delaying_the_gpu_adds_the_delay_to_each_kernels_latency(name: str, tmp_path: Path) -> None:
    before, _ = queue.kernel_latency_ns(read_trace(SAMPLES / name))
    after, _ = queue.kernel_latency_ns(read_trace(moved(name, tmp_path, gpu_us=K_US)))
    # Clipped at 0 (a kernel that started before its call returned), the latency is a non-decreasing function of the
    # raw difference, so both sorted put each kernel in the same place.
    b, a, k = np.sort(before), np.sort(after), K_US * 1000
    assert b.size == a.size > 0
    assert np.array_equal(a[b > 0], b[b > 0] + k)
    assert ((a[b == 0] >= 0) & (a[b == 0] <= k)).all()


@pytest.mark.parametrize("name", TRACES)
def test_a_delayed_gpu_never_shortens_a_queue_and_past_the_trace_queues_every_launch(name: str,
                                                                                     tmp_path: Path) -> None:
    trace = read_trace(SAMPLES / name)
    span_us = (int(trace.events.end_ns.max()) - int(trace.events.ts_ns.min())) / 1000
    before = {(s.device, s.stream): s for s in queue.stream_queues(trace)[0]}
    delayed = {(s.device, s.stream): s for s in queue.stream_queues(read_trace(moved(name, tmp_path, gpu_us=K_US)))[0]}
    past = queue.stream_queues(read_trace(moved(name, tmp_path, gpu_us=span_us + 1)))[0]
    assert delayed.keys() == before.keys()
    assert all(delayed[key].max_depth >= s.max_depth and delayed[key].launches == s.launches
               for key, s in before.items())
    assert past and all(s.max_depth == s.launches for s in past)


@pytest.mark.parametrize("name", TRACES[:2])
def test_moving_the_whole_trace_changes_nothing(name: str, tmp_path: Path) -> None:
    here = gpuscope.analyze(SAMPLES / name, save=False).analysis
    later = gpuscope.analyze(moved(name, tmp_path, all_us=1_000_000), save=False).analysis
    assert to_json([replace(r, source=None) for r in later.ranks]) == \
        to_json([replace(r, source=None) for r in here.ranks])
    assert later.verdict.summary == here.verdict.summary


def test_an_engine_step_range_renamed_and_named_with_step_range_is_the_same_step(tmp_path: Path) -> None:
    name = "serving/sglang_qwen3_8b_decode.json.gz"
    doc = json.loads(json.dumps(raw(name)))
    for e in doc["traceEvents"]:
        if str(e.get("name", "")).startswith("step[DECODE"):
            e["name"] = "decode_iteration"
        elif str(e.get("name", "")).startswith("execute_"):
            e["name"] = "scheduler_tick"
    path = tmp_path / "renamed.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))
    engine = find_steps(read_trace(SAMPLES / name))
    renamed = read_trace(path)
    assert not find_steps(renamed).from_profiler  # no engine range left: the host span stands in
    named = gpuscope.analyze(path, save=False, step_range="decode_").analysis.ranks[0]
    assert named.step_source == "range decode_" and named.steps == 1
    assert named.step_time_us == pytest.approx((int(engine.ends_ns[0]) - int(engine.starts_ns[0])) / 1000)
