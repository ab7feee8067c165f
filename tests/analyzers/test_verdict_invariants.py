"""Invariants of the diagnosis on random small traces and random live summaries (Hypothesis)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.diagnosis import savings
from gpuscope.analyzers.diagnosis.evidence import trace_evidence
from gpuscope.analyzers.diagnosis.stages import rank_shares
from gpuscope.analyzers.diagnosis.verdict import Diagnosis, choose, diagnose
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.model.diagnosis import STAGES
from gpuscope.model.live import GpuLive, HostLive, LiveSummary, StackLive
from gpuscope.model.trace import Kind, RankTrace
from tests.analyzers.test_verdict_cases import GIB, TraceBuilder, diagnose_run, live_run, trace_run

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def traces(draw: st.DrawFn, rank: int = 0) -> RankTrace:
    """A step loop with a random mix of loading, host work, copies, kernels, collectives and gaps."""
    b = TraceBuilder(rank=rank)
    t = 0.0
    for i in range(draw(st.integers(1, 3))):
        start = t
        loader = draw(st.floats(0, 5_000))
        if loader:
            b.host("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, loader)
            t += loader
        if draw(st.booleans()):
            b.gpu_event("Memcpy HtoD (Pageable -> Device)", t, t + 5, draw(st.floats(1, 2_000)), kind=Kind.MEMCPY,
                        runtime="cudaMemcpyAsync")
        for _ in range(draw(st.integers(0, 30))):
            host_us = draw(st.floats(1, 300))
            b.host("aten::conv2d", t, host_us)
            b.gpu_event("implicit_convolve_sgemm", t + 0.5, t + host_us, draw(st.floats(1, 2_000)))
            t += host_us + draw(st.floats(0, 100))
        if draw(st.booleans()):
            b.host("nccl:all_reduce", t, 10)
            b.gpu_event("ncclKernel_AllReduce_RING_LL_Sum_float", t + 1, t + 5, draw(st.floats(1, 3_000)))
        if draw(st.booleans()):
            b.host("aten::_local_scalar_dense", t + 10, 20)
            b.runtime("cudaStreamSynchronize", t + 11, 15)
        t += draw(st.sampled_from([10.0, 1_000.0, 600_000.0]))  # sometimes a long idle gap
        b.step(i, start, t - start)
    b.allocated(1.0, int(draw(st.floats(0.01, 0.99)) * 16 * GIB))
    return b.build()


unit = st.one_of(st.none(), st.floats(0.0, 1.0))


@st.composite
def lives(draw: st.DrawFn) -> LiveSummary:
    shares = [draw(st.floats(0.0, 1.0)) for _ in range(6)]
    total = sum(shares) or 1.0
    main = [x / total for x in shares]  # main-thread shares sum to 1, as the collector writes them
    stacks = draw(st.one_of(st.none(), st.just(StackLive(
        samples=100, main_dataloader_wait=main[0], main_sync=main[1], main_nccl_wait=main[2], main_launch=main[3],
        main_python=main[4], main_idle=main[5], workers_on_cpu=draw(unit), workers_io=draw(unit)))))
    gpu = GpuLive(gpu=0, samples=10, util_mean=draw(unit), idle_share=draw(unit), dram_active_mean=draw(unit),
                  sm_active_mean=draw(unit))
    host = HostLive(main_cpu_mean=draw(unit), workers=draw(st.integers(0, 8)), workers_cpu_mean=draw(unit),
                    iowait_mean=draw(unit))
    return LiveSummary(duration_s=10.0, gpus=(gpu,), host=host, stacks=stacks)


def check(d: Diagnosis) -> None:
    v = d.verdict
    assert 0.0 <= v.confidence <= 1.0
    shares = {k.removesuffix("_share"): float(x) for k, x in v.evidence.items()
              if k.endswith("_share") and isinstance(x, (int, float))}
    for x in shares.values():
        assert -1e-9 <= x <= 1.0 + 1e-9
    by_stage: dict[str | None, list[float]] = defaultdict(list)
    for r in d.recommendations:
        if r.est_step_saving is not None:
            assert 0.0 <= r.est_step_saving <= 1.0
            by_stage[r.stage].append(r.est_step_saving)
    for stage, values in by_stage.items():
        cap = shares.get(stage or "")
        if cap is not None:
            assert savings.combined(values) <= cap + 1e-9, (stage, values, cap)
    for f in d.findings:
        assert f.time_share is None or 0.0 <= f.time_share <= 1.0 + 1e-9
        assert set(f.recommendations) <= {r.code for r in d.recommendations}


@SETTINGS
@given(traces())
def test_random_trace_diagnosis_is_well_formed(trace: RankTrace) -> None:
    check(diagnose_run(trace_run(trace)))


@SETTINGS
@given(traces())
def test_rank_stage_shares_add_up_to_the_step(trace: RankTrace) -> None:
    r = analyze_rank(trace)
    shares = rank_shares(r, trace_evidence(trace))
    if r.step_time_us > 0:
        assert sum(shares.values()) == pytest.approx(1.0, abs=1e-6)
        assert all(x >= -1e-9 for x in shares.values())


@SETTINGS
@given(traces(rank=0), traces(rank=1))
def test_two_rank_diagnosis_is_well_formed(a: RankTrace, b: RankTrace) -> None:
    check(diagnose_run(trace_run(a, b)))


@SETTINGS
@given(lives())
def test_live_diagnosis_is_well_formed(live: LiveSummary) -> None:
    d = diagnose(live_run("live"), [], live)
    check(d)
    known = [float(x) for k, x in d.verdict.evidence.items() if k.endswith("_share") and isinstance(x, (int, float))]
    assert sum(known) <= 1.0 + 1e-6  # stages split the time, they do not overlap


@SETTINGS
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6), st.floats(0.0, 1.0))
def test_cap_stacked_never_exceeds_the_share(values: list[float], share: float) -> None:
    from gpuscope.model.diagnosis import Recommendation
    recs = [Recommendation(f"r{i}", "t", "d", v, "why", stage="memory") for i, v in enumerate(values)]
    capped = [r.est_step_saving or 0.0 for r in savings.cap_stacked(recs, {"memory": share})]
    assert savings.combined(capped) <= share + 1e-9
    assert all(0.0 <= c <= v + 1e-12 for c, v in zip(capped, values))


@SETTINGS
@given(st.fixed_dictionaries({s: st.one_of(st.none(), st.floats(0.0, 1.0)) for s in STAGES}))
def test_confidence_is_a_fraction(shares: dict[str, float | None]) -> None:
    from gpuscope.analyzers.diagnosis.stages import StageShares
    stage, confidence = choose(StageShares(shares=shares))  # type: ignore[arg-type]
    assert 0.0 <= confidence <= 1.0
    assert stage is None or stage in STAGES
