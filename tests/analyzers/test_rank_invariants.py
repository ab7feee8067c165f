"""Invariants of a rank's analysis on random traces: shares in 0..1, parts summing to their whole."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.trace import breakdown
from gpuscope.analyzers.trace.rank import analyze_rank, steady_breakdowns
from gpuscope.analyzers.trace.steps import Steps, find_steps
from gpuscope.model.rank import RankReport
from gpuscope.traces import read_trace
from tests import builders as b

HOST_NAMES = ["aten::mm", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "nccl:all_reduce",
              "Optimizer.step#SGD.step"]
KERNEL_NAMES = ["volta_sgemm_128x64_nn", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "elementwise_kernel",
                "multimem_all_reduce_kernel"]


@st.composite
def traces(draw: st.DrawFn) -> list[b.Event]:
    events: list[b.Event] = []
    n_steps = draw(st.integers(0, 4))
    t = 0.0
    for i in range(n_steps):
        dur = draw(st.floats(50, 2000))
        events.append(b.step(i, t, dur))
        t += dur + draw(st.floats(0, 100))
    span = max(t, 500.0)
    for corr in range(draw(st.integers(0, 25))):
        ts = draw(st.floats(0, span))
        events.append(b.launch(ts, draw(st.floats(0.5, 30)), corr))
        kind = draw(st.sampled_from(["kernel", "memcpy"]))
        start = ts + draw(st.floats(0, 300))
        if kind == "kernel":
            events.append(b.kernel(draw(st.sampled_from(KERNEL_NAMES)), start, draw(st.floats(0.5, 400)), corr,
                                   stream=draw(st.sampled_from([7, 13]))))
        else:
            events.append(b.memcpy(start, draw(st.floats(0.5, 100)), corr))
    for _ in range(draw(st.integers(0, 10))):
        events.append(b.cpu_op(draw(st.sampled_from(HOST_NAMES)), draw(st.floats(0, span)), draw(st.floats(1, 400))))
    for _ in range(draw(st.integers(0, 5))):
        events.append(b.memory(draw(st.floats(0, span)), 1024, draw(st.integers(0, 2**33))))
    return events


def analyse(events: list[b.Event]) -> RankReport:
    with TemporaryDirectory() as d:
        path = Path(d) / "t.json"
        path.write_text(json.dumps(b.trace(events)))
        return analyze_rank(read_trace(path))


def in_unit(x: float | None) -> bool:
    return x is None or -1e-9 <= x <= 1 + 1e-9


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_shares_are_fractions_and_parts_sum_to_the_whole(events: list[b.Event]) -> None:
    assume(events)  # a file without usable events is an error, tested with the reader
    r = analyse(events)
    assert in_unit(r.gpu_busy) and in_unit(r.kernel_utilization) and in_unit(r.communication.overlap)
    assert in_unit(r.memory.peak_share)
    for s in r.per_step:
        assert s.breakdown_us.total == pytest.approx(s.duration_us, abs=1e-3)
        assert min(vars(s.breakdown_us).values()) >= 0
        assert in_unit(s.gpu_busy)
    if r.per_step:
        assert r.step_time_us is not None and r.steps == len([s for s in r.per_step if not s.warmup])
        assert r.step_breakdown_us.total == pytest.approx(r.step_time_us, abs=1e-3)
    else:  # no profiler steps: none invented, the breakdown covers the (steady) window
        assert r.steps == 0 and r.step_time_us is None
        assert r.step_breakdown_us.total == pytest.approx(r.span_us, abs=1e-3)
    if r.temporal is not None:
        t = r.temporal
        assert t.idle_us + t.compute_us + t.non_compute_us == pytest.approx(r.window_us, abs=1e-3)
        assert min(t.idle_us, t.compute_us, t.non_compute_us) >= -1e-9
        assert r.idle_breakdown_us is not None
        i = r.idle_breakdown_us
        assert i.host_wait + i.kernel_wait + i.other + (i.gpu_side_wait or 0.0) == pytest.approx(t.idle_us, abs=1e-3)
        assert min(i.host_wait, i.kernel_wait, i.other, i.gpu_side_wait or 0.0) >= 0
    c = r.communication
    assert 0 <= c.exposed_us <= c.total_us + 1e-9
    if r.top_kernels:
        assert sum(k.share for k in r.top_kernels) <= 1 + 1e-9


def test_the_steady_steps_breakdowns_are_theirs_alone_taken_from_every_steps_where_steps_do_not_overlap(
        tmp_path: Path) -> None:
    """``analyze_rank`` breaks every profiler step down once and keeps the steady ones' parts where no two steps
    overlap; where they do, shared time goes by which steps there are, so the steady steps are broken down alone."""
    trace = read_trace(b.write(tmp_path / "t.json", b.trace(b.simple_training(4))))
    roles = breakdown.roles(trace)
    steps = find_steps(trace)
    assert len(steps) == 4
    differs = False
    for ends in (steps.ends_ns, steps.ends_ns + 300_000):  # as recorded; each running 300 µs into the next
        every = replace(steps, ends_ns=ends)
        for warm in ([True, False, False, False], [True, True, False, False], [False, True, False, True]):
            keep = ~np.array(warm)
            steady = Steps(tuple(n for n, k in zip(every.names, keep) if k), every.starts_ns[keep], ends[keep])
            alone = breakdown.step_breakdowns(roles, steady)
            assert steady_breakdowns(roles, every, ~keep, steady, breakdown.step_breakdowns(roles, every)) == alone
            differs |= [p for p, k in zip(breakdown.step_breakdowns(roles, every), keep) if k] != alone
    assert differs, "the overlapping steps are a case where taking every step's parts would be wrong"
