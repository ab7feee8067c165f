"""The cost model's arithmetic on runs built in code: GPU-hours, waste by cause, projections, savings."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscope.analyzers import cost
from gpuscope.analyzers.cost import NO_PRICE
from gpuscope.analyzers.diagnosis.evidence import TraceEvidence
from gpuscope.analyzers.diagnosis.stages import combine, live_shares, trace_shares
from gpuscope.analyzers.diagnosis.verdict import Diagnosis
from gpuscope.model.cost import CostReport, JobSpec, Price
from gpuscope.model.diagnosis import Recommendation, Verdict
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.live import GpuLive, LiveSummary, StackLive
from gpuscope.model.rank import Communication, Memory, RankReport, StepBreakdown
from gpuscope.model.run import Run, RunMeta

HOUR_US = 3.6e9
HOUR_NS = 3_600_000_000_000
NO_DIAGNOSIS = Diagnosis(verdict=Verdict(primary=None, resource="unknown"))
# Half the step in kernels, the rest lost: 30% DataLoader, 10% host, 5% copies, 5% nothing at all.
HALF_BUSY = StepBreakdown(kernel=50, memcpy=4, memset=1, runtime=4, dataloader=30, cpu_exec=6, other=5)


def rank(window_us: float = HOUR_US, *, steps: int = 10, breakdown: StepBreakdown = HALF_BUSY,
         busy: float | None = 0.55, peak_bytes: int | None = 2 * 2**30, index: int = 0) -> RankReport:
    """A rank whose mean step is ``breakdown`` scaled to window / steps (as in a real report, the parts add up)."""
    step_us = window_us / steps if steps and breakdown.total > 0 else 0.0
    scale = step_us / breakdown.total if step_us else 1.0
    scaled = StepBreakdown(*(getattr(breakdown, f) * scale for f in StepBreakdown.__dataclass_fields__))
    return RankReport(
        rank=index, window_us=window_us, steps=steps, step_time_us=step_us,
        gpu_busy=busy, step_breakdown_us=scaled, temporal=None, idle_breakdown_us=None,
        communication=Communication(total_us=0.0, exposed_us=0.0, overlap=None),
        memory=Memory(peak_allocated_bytes=peak_bytes, device_bytes=32 * 10**9),
    )


def trace_run(n: int = 1) -> Run:
    meta = RunMeta(id="r", name="r", kind="trace", status="complete", started_ns=0, ended_ns=1,
                   gpus=tuple(GpuInfo(index=i, name="Tesla V100-SXM2-32GB") for i in range(n)))
    return Run(meta=meta)


def assess(run: Run, ranks: list[RankReport], live: LiveSummary | None, diagnosis: Diagnosis, price: Price | None,
           job: JobSpec) -> tuple[CostReport | None, tuple[Recommendation, ...]]:
    """The cost model as the report runs it: on the stage shares the verdict was chosen from."""
    shares = combine(trace_shares(ranks, [TraceEvidence(rank=r.rank) for r in ranks]),
                     live_shares(live) if live is not None else None)
    return cost.assess(run, ranks, live, replace(diagnosis, shares=shares), price, job)


def priced(usd: float | None = 2.0) -> Price:
    return Price(usd_per_gpu_hour=usd, source="test price" if usd is not None else None,
                 note=None if usd is not None else "set a price like this")


def test_one_gpu_hour_priced_and_its_waste_split_by_cause() -> None:
    report, _ = assess(trace_run(), [rank()], None, NO_DIAGNOSIS, priced(2.0), JobSpec())
    assert report is not None
    assert report.gpu_hours == pytest.approx(1.0) and report.gpu_count == 1
    assert report.total_usd == pytest.approx(2.0) and report.price_source == "test price"
    assert report.wasted_usd == pytest.approx(1.0)
    w = report.waste_by_cause_usd
    # The verdict's stages: Runtime + CPU Exec + Other is host overhead (no GPU gap over 500 ms: no idle).
    assert (w.data_loading, w.host_overhead, w.memory, w.idle, w.communication, w.unattributed) == pytest.approx(
        (0.6, 0.3, 0.1, 0.0, 0.0, 0.0))
    assert report.per_step_usd == pytest.approx(0.2) and report.per_1k_steps_usd == pytest.approx(200.0)
    assert report.waste_basis == "stage_shares" and report.note is None
    assert report.energy_kwh is None and report.co2_kg is None  # traces carry no power data


def test_ranks_are_gpus_and_their_waste_is_weighted_by_window() -> None:
    busy_rank = rank(HOUR_US, breakdown=StepBreakdown(kernel=100), index=0)
    comm_rank = rank(3 * HOUR_US, breakdown=StepBreakdown(kernel=20, communication=80), index=1)
    report, _ = assess(trace_run(2), [busy_rank, comm_rank], None, NO_DIAGNOSIS, priced(1.0), JobSpec())
    assert report is not None
    assert report.gpu_hours == pytest.approx(4.0) and report.gpu_count == 2
    assert report.wasted_usd == pytest.approx(2.4)
    assert report.waste_by_cause_usd.communication == pytest.approx(2.4)
    # A job's step ends when its slowest rank's does (0.3 h here), and both GPUs are held for it: 2 x 0.3 GPU-h.
    assert report.per_step_usd == pytest.approx(0.6)


def test_projection_from_job_hours_or_job_steps() -> None:
    ranks = [rank(index=0), rank(index=1)]
    by_hours, _ = assess(trace_run(2), ranks, None, NO_DIAGNOSIS, priced(2.0), JobSpec(job_hours=10.0))
    assert by_hours is not None and by_hours.projected_usd == pytest.approx(40.0)
    assert by_hours.projection_basis == "job_hours"
    assert by_hours.projected_wasted_usd == pytest.approx(20.0)
    by_steps, _ = assess(trace_run(2), ranks, None, NO_DIAGNOSIS, priced(2.0), JobSpec(job_steps=1000))
    assert by_steps is not None and by_steps.projected_usd == pytest.approx(1000 * 0.4)
    assert by_steps.projection_basis == "job_steps"
    both, _ = assess(trace_run(2), ranks, None, NO_DIAGNOSIS, priced(2.0), JobSpec(job_hours=1.0, job_steps=5))
    assert both is not None and both.projected_usd == pytest.approx(4.0)
    per_sample, _ = assess(trace_run(), [rank()], None, NO_DIAGNOSIS, priced(2.0), JobSpec(samples_per_step=64))
    assert per_sample is not None and per_sample.per_1k_samples_usd == pytest.approx(0.2 / 64 * 1000)


def test_recommendations_get_their_share_of_the_measured_or_projected_cost() -> None:
    recs = (Recommendation(code="num_workers", title="t", detail="d", est_step_saving=0.3),
            Recommendation(code="vague", title="t", detail="d", est_step_saving=None))
    diagnosis = Diagnosis(verdict=Verdict(primary="data_loading", resource="unknown"), recommendations=recs)
    _, measured = assess(trace_run(), [rank()], None, diagnosis, priced(2.0), JobSpec())
    assert [r.est_saving_usd for r in measured] == [pytest.approx(0.6), None]
    _, projected = assess(trace_run(), [rank()], None, diagnosis, priced(2.0), JobSpec(job_hours=100.0))
    assert projected[0].est_saving_usd == pytest.approx(60.0)
    _, unpriced = assess(trace_run(), [rank()], None, diagnosis, priced(None), JobSpec(job_hours=100.0))
    assert [r.est_saving_usd for r in unpriced] == [None, None]
    assert [r.code for r in unpriced] == ["num_workers", "vague"]


def test_unknown_price_keeps_gpu_hours_and_nulls_every_dollar() -> None:
    report, _ = assess(trace_run(), [rank()], None, NO_DIAGNOSIS, priced(None), JobSpec(job_hours=5.0))
    assert report is not None and report.gpu_hours == pytest.approx(1.0)
    assert report.total_usd is None and report.wasted_usd is None and report.usd_per_gpu_hour is None
    assert report.per_step_usd is None and report.projected_usd is None
    assert all(v is None for v in vars(report.waste_by_cause_usd).values())
    assert report.note == "set a price like this"
    no_price, _ = assess(trace_run(), [rank()], None, NO_DIAGNOSIS, None, JobSpec())
    assert no_price is not None and no_price.note == NO_PRICE


def test_unknowns_stay_unknown() -> None:
    no_steps, _ = assess(trace_run(), [rank(steps=0, breakdown=StepBreakdown())], None, NO_DIAGNOSIS, priced(),
                         JobSpec(job_steps=10))
    assert no_steps is not None and no_steps.total_usd == pytest.approx(2.0)
    assert no_steps.wasted_usd is None and no_steps.per_step_usd is None and no_steps.projected_usd is None
    nothing, recs = assess(trace_run(), [], None, NO_DIAGNOSIS, priced(), JobSpec())
    assert nothing is None and recs == ()


@given(st.lists(st.tuples(st.floats(1.0, 1e10), st.lists(st.floats(0.0, 1e6), min_size=8, max_size=8)),
                min_size=1, max_size=8),
       st.floats(0.01, 100.0))
def test_waste_never_exceeds_the_total_and_its_parts_add_up(ranks_spec: list[tuple[float, list[float]]],
                                                            usd: float) -> None:
    ranks = [rank(w, breakdown=StepBreakdown(*parts), index=i) for i, (w, parts) in enumerate(ranks_spec)]
    report, _ = assess(trace_run(len(ranks)), ranks, None, NO_DIAGNOSIS, priced(usd), JobSpec())
    assert report is not None and report.total_usd is not None
    if all(sum(parts) <= 0 for _, parts in ranks_spec):
        assert report.wasted_usd is None
        return
    assert report.wasted_usd is not None
    assert -1e-9 <= report.wasted_usd <= report.total_usd * (1 + 1e-9)
    parts = [v for v in vars(report.waste_by_cause_usd).values() if v is not None]
    assert sum(parts) == pytest.approx(report.wasted_usd, rel=1e-9, abs=1e-12)
    assert all(p >= 0 for p in parts)


def live_run(hours: float = 2.0, gpus: int = 2, *, ended: bool = True) -> Run:
    meta = RunMeta(id="l", name="l", kind="attach", status="complete", started_ns=0,
                   ended_ns=int(hours * HOUR_NS) if ended else None,
                   gpus=tuple(GpuInfo(index=i, name="NVIDIA A10G") for i in range(gpus)))
    return Run(meta=meta)


def test_live_run_is_duration_times_gpus_and_wastes_its_idle_time() -> None:
    live = LiveSummary(duration_s=7200.0, gpus=(GpuLive(gpu=0, samples=10, util_mean=0.75),
                                                GpuLive(gpu=1, samples=10, util_mean=0.25)))
    report, _ = assess(live_run(), [], live, NO_DIAGNOSIS, priced(1.0), JobSpec())
    assert report is not None and report.gpu_hours == pytest.approx(4.0) and report.gpu_count == 2
    # Without stack samples or idle samples, the time no kernel ran has no measured cause.
    w = report.waste_by_cause_usd
    assert report.wasted_usd == pytest.approx(2.0) and w.unattributed == pytest.approx(2.0)
    assert w.idle == pytest.approx(0.0) and report.waste_basis == "stage_shares"
    # NVML counts NCCL and copy kernels as busy: those causes are not measured here.
    assert w.communication is None and w.memory is None
    assert report.per_step_usd is None


def test_live_idle_time_is_split_by_what_the_main_thread_was_doing() -> None:
    stacks = StackLive(samples=100, main_dataloader_wait=0.3, main_launch=0.1, main_python=0.05)
    live = LiveSummary(duration_s=3600.0, gpus=(GpuLive(gpu=0, samples=10, util_mean=0.4),), stacks=stacks)
    report, _ = assess(live_run(1.0, 1), [], live, NO_DIAGNOSIS, priced(10.0), JobSpec())
    assert report is not None and report.wasted_usd == pytest.approx(6.0)
    # The 60% not busy is split in proportion to the main thread's samples: 0.3 : 0.15.
    w = report.waste_by_cause_usd
    assert (w.data_loading, w.host_overhead, w.idle, w.unattributed) == pytest.approx((4.0, 2.0, 0.0, 0.0))
    greedy = StackLive(samples=100, main_dataloader_wait=0.9, main_launch=0.5)
    split, _ = assess(live_run(1.0, 1), [], LiveSummary(duration_s=3600.0, gpus=live.gpus, stacks=greedy),
                      NO_DIAGNOSIS, priced(10.0), JobSpec())
    assert split is not None and split.wasted_usd == pytest.approx(6.0)
    assert split.waste_by_cause_usd.data_loading == pytest.approx(6.0 * 0.9 / 1.4)


def test_live_run_without_duration_or_utilization() -> None:
    still_running = LiveSummary(duration_s=1800.0)
    report, _ = assess(live_run(ended=False), [], still_running, NO_DIAGNOSIS, priced(1.0), JobSpec())
    assert report is not None and report.gpu_hours == pytest.approx(1.0) and report.wasted_usd is None
    nothing, _ = assess(live_run(ended=False), [], None, NO_DIAGNOSIS, priced(1.0), JobSpec())
    assert nothing is None


def test_a_live_run_with_profiled_steps_prices_steps_from_them() -> None:
    live = LiveSummary(duration_s=7200.0)
    report, _ = assess(live_run(), [rank(HOUR_US / 100, steps=10)], live, NO_DIAGNOSIS, priced(1.0), JobSpec())
    assert report is not None and report.gpu_hours == pytest.approx(4.0)
    assert report.per_step_usd == pytest.approx(0.001)
    assert report.waste_basis == "stage_shares" and report.wasted_usd == pytest.approx(2.0)


def test_waste_basis_is_null_when_the_waste_is_unknown() -> None:
    report, _ = assess(trace_run(), [rank(steps=0, breakdown=StepBreakdown())], None, NO_DIAGNOSIS, priced(),
                       JobSpec())
    assert report is not None and report.wasted_usd is None and report.waste_basis is None
