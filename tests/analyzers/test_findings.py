"""Findings and their rules on small traces built in code: each rule fires on its evidence and only then."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuscope.analyzers.diagnosis import savings
from gpuscope.analyzers.diagnosis.evidence import trace_evidence
from gpuscope.analyzers.diagnosis.stragglers import find_straggler
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.model.diagnosis import Recommendation
from gpuscope.model.trace import Kind
from tests.analyzers.test_verdict_cases import (
    TraceBuilder,
    diagnose_run,
    gpu_compute_trace,
    idle_trace,
    memory_trace,
    straggler_traces,
    trace_run,
)


def codes(d: object) -> set[str]:
    return {f.code for f in d.findings}  # type: ignore[attr-defined]


def dataloader_trace(*, mode: str = "Single", loader_us: float = 4_000, with_item: bool = False) -> TraceBuilder:
    b = TraceBuilder()
    for i in range(4):
        t = i * 10_000.0
        b.step(i, t, 10_000.0)
        b.host(f"enumerate(DataLoader)#_{mode}ProcessDataLoaderIter.__next__" if mode == "Single"
               else "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", t, loader_us)
        for k in range(6):
            b.host("aten::conv2d", t + loader_us + k * 10, 8)
            b.gpu_event("implicit_convolve_sgemm", t + loader_us + k * 10 + 2, t + loader_us + 100 + k * 900, 890)
        if with_item:
            b.host("aten::item", t + 9_900, 60)
            b.host("aten::_local_scalar_dense", t + 9_901, 58)
            b.runtime("cudaStreamSynchronize", t + 9_905, 50)
    return b


def test_single_process_loader_gets_num_workers_with_the_modelled_saving() -> None:
    d = diagnose_run(trace_run(dataloader_trace().build()))
    assert d.verdict.primary == "data_loading"
    r = next(r for r in d.recommendations if r.code == "dataloader_num_workers")
    f = next(f for f in d.findings if f.code == "dataloader_share_high")
    share = f.evidence["dataloader_share"]
    assert isinstance(share, float)
    gpu = analyze_rank(dataloader_trace().build()).gpu_busy
    assert r.est_step_saving == pytest.approx(savings.more_workers(share, gpu or 0.0).fraction, abs=1e-6)


def test_multi_process_loader_gets_more_workers_and_prefetch() -> None:
    d = diagnose_run(trace_run(dataloader_trace(mode="Multi").build()))
    got = {r.code for r in d.recommendations}
    assert {"dataloader_num_workers", "dataloader_prefetch"} <= got
    assert next(r for r in d.recommendations if r.code == "dataloader_num_workers").title == "Add DataLoader workers"


def test_short_dataloader_is_no_finding() -> None:
    d = diagnose_run(trace_run(dataloader_trace(loader_us=200).build()))
    assert "dataloader_share_high" not in codes(d)


def test_item_calls_and_syncs_are_named() -> None:
    t = dataloader_trace(with_item=True).build()
    ev = trace_evidence(t)
    assert ev.item_calls == 4 and dict(ev.sync_calls) == {"cudaStreamSynchronize": 4}
    f = next(f for f in diagnose_run(trace_run(t)).findings if f.code == "sync_calls")
    assert f.evidence["item_calls"] == 4 and "cudaStreamSynchronize x4" in f.title


def test_pageable_copies_and_capacity() -> None:
    d = diagnose_run(trace_run(memory_trace()))
    assert {"pageable_memcpy", "memory_near_capacity"} <= codes(d)
    cap = next(f for f in d.findings if f.code == "memory_near_capacity")
    assert cap.evidence["peak_share"] == pytest.approx(0.95, abs=0.001)
    pin = next(r for r in d.recommendations if r.code == "pin_memory")
    assert pin.est_step_saving == pytest.approx(0.2, abs=0.01)  # half of the 40% the copies take
    assert next(r for r in d.recommendations if r.code == "activation_checkpointing").est_step_saving is None


def test_synchronous_memcpy_is_flagged() -> None:
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.gpu_event("Memcpy HtoD (Pinned -> Device)", 10, 20, 100, kind=Kind.MEMCPY, runtime="cudaMemcpy",
                launch_dur_us=120)
    b.gpu_event("volta_sgemm_128x64_nn", 200, 210, 700)
    assert trace_evidence(b.build()).sync_memcpy == 1
    assert "sync_memcpy" in codes(diagnose_run(trace_run(b.build())))


def test_nsys_gap_and_chunk_rules() -> None:
    ev = trace_evidence(idle_trace())
    assert ev.long_gaps == 1 and ev.long_gap_us > 3_000_000 * 0.95
    assert ev.low_util_chunks == 30
    assert {"gpu_gap_long", "gpu_idle", "gpu_util_low_chunks"} <= codes(diagnose_run(trace_run(idle_trace())))
    busy = trace_evidence(gpu_compute_trace())
    assert busy.long_gaps == 0 and busy.low_util_chunks == 0


def test_tensor_core_rule_needs_eligible_ops_without_tensor_cores() -> None:
    fp32 = dataloader_trace(loader_us=200).build()  # sgemm kernels launched by aten::conv2d
    ev = trace_evidence(fp32)
    assert ev.tc_eligible_share == pytest.approx(1.0) and ev.tc_share == 0.0
    assert "tensor_cores_unused" in codes(diagnose_run(trace_run(fp32)))
    tc = trace_evidence(gpu_compute_trace())  # h884 kernels already on tensor cores
    assert tc.tc_share == pytest.approx(1.0)
    assert "tensor_cores_unused" not in codes(diagnose_run(trace_run(gpu_compute_trace())))


def test_data_parallel_and_gloo_are_flagged() -> None:
    b = dataloader_trace(loader_us=200)
    b.host("DataParallel.forward", 300, 500, kind=Kind.USER_ANNOTATION)
    d = diagnose_run(trace_run(b.build()))
    assert "data_parallel" in codes(d) and any(r.code == "use_ddp" for r in d.recommendations)
    r0, r1 = straggler_traces()
    gloo = trace_run(replace(r0, backend="gloo"), replace(r1, backend="gloo"))
    assert "ddp_not_nccl" in codes(diagnose_run(gloo))
    assert "ddp_not_nccl" not in codes(diagnose_run(trace_run(*straggler_traces())))


def test_straggler_is_the_rank_with_least_collective_time() -> None:
    ranks = [analyze_rank(t) for t in straggler_traces()]
    s = find_straggler(ranks)
    assert s is not None and s.rank == 1
    assert s.max_wait_rank == 0 and s.max_wait_us == pytest.approx(6_000, abs=1)
    assert find_straggler(ranks[:1]) is None


def test_balanced_ranks_have_no_straggler() -> None:
    r0, _ = straggler_traces()
    ranks = [analyze_rank(r0), replace(analyze_rank(r0), rank=1)]
    assert find_straggler(ranks) is None


def test_collective_waits_on_the_host_count_as_communication() -> None:
    b = TraceBuilder()
    b.step(0, 0, 10_000)
    b.host("## KJTAllToAllSplitsAwaitable wait() ##", 100, 3_000, kind=Kind.USER_ANNOTATION)
    b.host("## NoWait wait() ##", 3_200, 1_000, kind=Kind.USER_ANNOTATION)
    b.gpu_event("volta_sgemm_128x64_nn", 4_500, 4_510, 5_000)
    ev = trace_evidence(b.build())
    assert ev.collective_wait_us == pytest.approx(3_000)


def test_cap_stacked_keeps_a_stage_within_its_share() -> None:
    recs = [Recommendation(c, c, "detail", s, "why", stage="host_overhead") for c, s in
            (("a", 0.2), ("b", 0.2), ("c", 0.1))]
    capped = savings.cap_stacked(recs, {"host_overhead": 0.3})
    values = [r.est_step_saving or 0.0 for r in capped]
    assert savings.combined(values) == pytest.approx(0.3, abs=1e-6)
    assert values[0] == pytest.approx(values[1]) and values[0] == pytest.approx(2 * values[2])
    # The reasoning ends on the number the recommendation carries, so header and text agree.
    assert capped[0].reasoning.endswith(f"scaled by 0.67: {values[0]:.1%} for this one.")
    untouched = savings.cap_stacked(recs[:1], {"host_overhead": 0.3})
    assert untouched[0] is recs[0]


def test_more_workers_model() -> None:
    # After: max(GPU 0.566, 0.666 x 1.2 = 0.800): the host, slowed by the workers, becomes the bound.
    assert savings.more_workers(0.334, 0.566).fraction == pytest.approx(1 - 0.666 * 1.2, abs=1e-9)
    assert savings.more_workers(0.5, 0.9).fraction == pytest.approx(0.1)  # the GPU is the bound after
    assert savings.more_workers(0.05, 0.4).fraction == 0.0  # contention eats a small stall


def test_a_trace_without_gpu_work_gets_no_verdict() -> None:
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.host("aten::add", 10, 500)
    d = diagnose_run(trace_run(b.build()))
    assert d.verdict.primary is None and d.verdict.resource == "unknown" and d.verdict.confidence == 0.0
    assert d.recommendations == ()


def test_live_memory_near_capacity_is_a_finding() -> None:
    from gpuscope.analyzers.diagnosis.verdict import diagnose
    from tests.analyzers.test_verdict_cases import GIB, live, live_run
    d = diagnose(live_run("full"), [], live(0.9, used_bytes=int(15.5 * GIB)))
    f = next(f for f in d.findings if f.code == "memory_near_capacity")
    assert f.evidence["peak_share"] == pytest.approx(15.5 / 16)
    assert "activation_checkpointing" in f.recommendations
    roomy = diagnose(live_run("roomy"), [], live(0.9, used_bytes=2 * GIB))
    assert "memory_headroom" in codes(roomy) and "memory_near_capacity" not in codes(roomy)
