"""The consistency check: every bundled report passes it, and each check catches the contradiction it names in a
report built by hand to contain it."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from gpuscope.analyzers import consistency
from gpuscope.analyzers.advice.batch import BATCH_HEADROOM
from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.analyzers.report import build_report
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.api.analysis import trace_run_meta
from gpuscope.model.cost import CostReport, WasteSplit
from gpuscope.model.diagnosis import Finding, JobFacts, Recommendation, Verdict
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.live import HostLive, LiveSummary
from gpuscope.model.rank import Memory
from gpuscope.model.report import Report, RunSummary
from gpuscope.model.run import Run, RunMeta
from gpuscope.traces import load
from tests.analyzers.bundled import ALL, bundled_report
from tests.conftest import SAMPLES


@pytest.mark.parametrize("name", ALL)
def test_every_bundled_trace_passes_the_check(name: str) -> None:
    report = bundled_report(name)
    assert consistency.problems(report) == ()
    assert not any(w.startswith(consistency.BUG) for w in report.warnings)


def test_the_recorded_live_runs_pass_the_check() -> None:
    """The live runs recorded with real NVML on an H200 (sample_traces/h200/live), analysed again from their
    samples: a live run's report passes the same check."""
    for name, gpu in (("h200-loader0", "NVIDIA H200"), ("h200-light-tenant", "NVIDIA H200")):
        samples = pd.read_csv(SAMPLES / "h200" / "live" / f"{name}.samples.csv.gz")
        start, end = int(samples["ts_ns"].min()), int(samples["ts_ns"].max())
        meta = RunMeta(id=name, name=name, kind="run", status="target_exited", started_ns=start, ended_ns=end,
                       gpus=(GpuInfo(index=0, name=gpu, memory_bytes=150754820096),))
        report = build_report(Run(meta=meta, samples=samples))
        assert report.live is not None and report.live.gpus
        assert consistency.problems(report) == ()


def bare(**kw: object) -> Report:
    """A report with nothing in it but what a test gives."""
    base = Report(run=RunSummary(id="x", kind="trace"), ranks=(), verdict=Verdict(primary=None, resource="unknown"))
    return replace(base, **kw)  # type: ignore[arg-type]


def rec(code: str, saving: float | None, stage: str = "host_overhead", title: str = "") -> Recommendation:
    return Recommendation(code, title or code, "detail", saving, "why", stage=stage)  # type: ignore[arg-type]


def test_memory_at_93_percent_and_double_the_batch_is_caught_and_the_batch_advice_withdrawn() -> None:
    report = bare(facts=JobFacts(peak_memory_share=0.93, ranks=1),
                  findings=(Finding("memory_near_capacity", "warning", "Peak device memory is 93% of the GPU's memory",
                                    recommendations=("activation_checkpointing",)),
                            Finding("host_wait_idle", "warning", "host", recommendations=("larger_batch",))),
                  recommendations=(rec("larger_batch", 0.1, title="Use a larger batch"),
                                   rec("activation_checkpointing", None, "memory")),
                  stage_shares={"host_overhead": 0.2})
    (problem,) = consistency.problems(report)
    assert problem.check == "batch_vs_memory" and problem.withdraw == "larger_batch" and "93%" in problem.text
    fixed = consistency.enforce(report)
    assert [r.code for r in fixed.recommendations] == ["activation_checkpointing"]
    assert all("larger_batch" not in f.recommendations for f in fixed.findings)
    (warning,) = fixed.warnings
    assert warning.startswith(consistency.BUG) and "withdrawn" in warning
    assert consistency.problems(fixed) == ()


def test_the_check_reads_the_worst_rank_against_the_headroom_line() -> None:
    report = bare(facts=JobFacts(peak_memory_share=0.45, ranks=2), recommendations=(rec("larger_batch", 0.1),),
                  stage_shares={"host_overhead": 0.2})
    assert consistency.problems(report) == ()
    assert consistency.problems(replace(report, facts=JobFacts(peak_memory_share=0.5, ranks=2)))


def test_more_workers_on_saturated_cores_is_caught() -> None:
    live = LiveSummary(duration_s=60.0, host=HostLive(host_cpu_mean=0.97, cpu_count=8))
    report = bare(live=live, recommendations=(rec("dataloader_num_workers", 0.1, "data_loading"),),
                  stage_shares={"data_loading": 0.3})
    (problem,) = consistency.problems(report)
    assert problem.check == "workers_vs_cores" and problem.withdraw == "dataloader_num_workers"
    cool = replace(report, live=replace(live, host=HostLive(host_cpu_mean=0.5, cpu_count=8)))
    assert consistency.problems(cool) == ()


def test_the_verdicts_cause_must_be_the_largest_waste() -> None:
    cost = CostReport(gpu_hours=1.0, usd_per_gpu_hour=2.0, price_source="t", total_usd=2.0, wasted_usd=1.0,
                      waste_by_cause_usd=WasteSplit(data_loading=0.3, host_overhead=0.7))
    report = bare(verdict=Verdict(primary="data_loading", resource="unknown"), cost=cost)
    (problem,) = consistency.problems(report)
    assert problem.check == "largest_cause" and "host_overhead" in problem.text
    agreeing = replace(report, verdict=Verdict(primary="host_overhead", resource="cpu"))
    assert consistency.problems(agreeing) == ()


def test_shares_out_of_range_or_adding_past_the_step_are_caught() -> None:
    found = consistency.problems(bare(stage_shares={"data_loading": 1.2}))
    assert {p.check for p in found} == {"bounds"}
    assert any("stage share data_loading is 1.2" in p.text for p in found)
    assert any("add up to 1.2000" in p.text for p in found)
    assert [p.check for p in consistency.problems(bare(stage_shares={"data_loading": 0.6, "host_overhead": 0.6}))
            ] == ["bounds"]
    assert consistency.problems(bare(facts=JobFacts(gpu_busy=-0.1)))


def test_a_saving_larger_than_its_stage_is_caught() -> None:
    report = bare(recommendations=(rec("cuda_graphs", 0.25),), stage_shares={"host_overhead": 0.2})
    (problem,) = consistency.problems(report)
    assert problem.check == "savings_vs_waste" and problem.withdraw == "cuda_graphs"


def test_recommendations_out_of_saving_order_are_caught() -> None:
    report = bare(recommendations=(rec("a", 0.05), rec("b", 0.1)), stage_shares={"host_overhead": 0.2})
    assert [p.check for p in consistency.problems(report)] == ["order"]


def test_a_gpu_verdict_without_a_gpu_is_caught() -> None:
    live = LiveSummary(duration_s=60.0, host=HostLive(main_cpu_mean=0.1))
    report = bare(live=live, verdict=Verdict(primary="idle", resource="gpu"))
    assert [p.check for p in consistency.problems(report)] == ["no_gpu"]


@pytest.mark.parametrize("name", ALL)
def test_advice_quotes_the_peak_the_memory_finding_quotes(name: str) -> None:
    """Wherever a batch recommendation or a memory finding quotes peak memory, it is the worst rank's figure."""
    report = bundled_report(name)
    share = facts_of(report).peak_memory_share
    texts = [r.detail for r in report.recommendations if r.code in ("larger_batch", "dynamic_batching")]
    texts += [f.title for f in report.findings if f.code in ("memory_headroom", "memory_near_capacity")]
    for text in texts:
        if "peak memory" in text.lower() and share is not None:
            assert f"{share:.0%}" in text, (name, text)


def test_one_full_rank_among_four_stops_the_batch_advice_the_mean_would_give() -> None:
    """Four ranks of a host-bound ResNet-50 job, three at 20% of the device and one at 93%: the mean (38%) is under
    the 50% headroom line, the worst rank is not. The batch advice follows the worst rank, as the memory finding
    does, so the report does not say both "memory 93%" and "double the batch"."""
    (trace,) = load(SAMPLES / "resnet50_workers4").traces
    traces = tuple(replace(trace, rank=i) for i in range(4))
    device = 32 * 10**9
    ranks = tuple(replace(analyze_rank(t), memory=Memory(int(share * device), device, share))
                  for t, share in zip(traces, (0.2, 0.2, 0.2, 0.93)))
    report = build_report(Run(meta=trace_run_meta(traces, name="four"), traces=traces), ranks=ranks)
    assert report.verdict.primary == "host_overhead"
    assert sum(r.memory.peak_share or 0.0 for r in ranks) / 4 < BATCH_HEADROOM
    codes = {r.code for r in report.recommendations}
    assert "larger_batch" not in codes and "activation_checkpointing" in codes
    (full,) = [f for f in report.findings if f.code == "memory_near_capacity"]
    assert "93%" in full.title and "rank 3" in full.title
    assert report.facts is not None and report.facts.peak_memory_rank == 3
    assert not report.warnings


def test_more_workers_for_a_loader_waiting_on_reads_holds_on_busy_cores() -> None:
    live = LiveSummary(duration_s=60.0, host=HostLive(host_cpu_mean=0.97, cpu_count=8))
    report = bare(live=live, verdict=Verdict(primary="data_loading", resource="io"),
                  recommendations=(rec("dataloader_num_workers", 0.1, "data_loading"),),
                  stage_shares={"data_loading": 0.3})
    assert consistency.problems(report) == ()


def test_a_failed_check_is_named_recorded_and_enforcing_again_changes_nothing() -> None:
    report = bare(recommendations=(rec("cuda_graphs", 0.25),), stage_shares={"host_overhead": 0.2})
    fixed = consistency.enforce(report)
    assert fixed.recommendations == () and fixed.failed_checks == ("savings_vs_waste",)
    (warning,) = fixed.warnings
    assert "check savings_vs_waste" in warning and "advice yields to measurement" in warning
    assert consistency.enforce(fixed) == fixed  # a report enforced when saved comes back as it was


def test_recommendations_out_of_order_are_put_in_order_of_their_saving() -> None:
    report = bare(recommendations=(rec("a", 0.05), rec("n", None), rec("b", 0.1), rec("c", 0.02)),
                  stage_shares={"host_overhead": 0.2})
    fixed = consistency.enforce(report)
    assert [r.code for r in fixed.recommendations] == ["b", "n", "a", "c"]  # a saving-less one keeps its place
    assert fixed.failed_checks == ("order",) and consistency.problems(fixed) == ()


def waste_report(primary: str, shares: dict[str, float]) -> Report:
    cost = CostReport(gpu_hours=1.0, usd_per_gpu_hour=2.0, price_source="t", total_usd=2.0, wasted_usd=1.0,
                      waste_by_cause_usd=WasteSplit(data_loading=0.3, host_overhead=0.7))
    return bare(verdict=Verdict(primary=primary, resource="unknown"), cost=cost,  # type: ignore[arg-type]
                stage_shares=shares)


def test_a_verdict_that_contradicts_the_measured_shares_is_withdrawn() -> None:
    """The verdict says data loading; the measured shares and the cost's split both say host overhead: the
    verdict, inferred, yields to the measurement."""
    report = waste_report("data_loading", {"data_loading": 0.15, "host_overhead": 0.35})
    (problem,) = consistency.problems(report)
    assert problem.check == "largest_cause" and problem.yields == "verdict"
    fixed = consistency.enforce(report)
    assert fixed.verdict.primary is None and fixed.verdict.resource == "unknown" and fixed.verdict.confidence == 0
    assert "largest_cause" in fixed.verdict.summary and fixed.cost == report.cost
    assert consistency.problems(fixed) == ()


def test_a_waste_split_that_contradicts_the_verdict_and_the_shares_is_withdrawn() -> None:
    """The verdict and the measured shares say data loading; the cost's split says host overhead: the split, a
    derived figure, yields and its waste is left unattributed."""
    report = waste_report("data_loading", {"data_loading": 0.35, "host_overhead": 0.15})
    (problem,) = consistency.problems(report)
    assert problem.yields == "waste_split"
    fixed = consistency.enforce(report)
    assert fixed.verdict == report.verdict and fixed.cost is not None
    assert fixed.cost.waste_by_cause_usd == WasteSplit(unattributed=1.0) and fixed.cost.wasted_usd == 1.0
    assert consistency.problems(fixed) == ()


def test_a_gpu_verdict_without_a_gpu_is_withdrawn() -> None:
    live = LiveSummary(duration_s=60.0, host=HostLive(main_cpu_mean=0.1))
    fixed = consistency.enforce(bare(live=live, verdict=Verdict(primary="idle", resource="gpu")))
    assert fixed.verdict.primary is None and fixed.failed_checks == ("no_gpu",)
    assert "check no_gpu" in fixed.warnings[0] and "withdrawn" in fixed.warnings[0]


def test_an_impossible_measurement_is_flagged_and_nothing_is_withdrawn_for_it() -> None:
    report = bare(stage_shares={"data_loading": 1.2}, recommendations=(rec("a", 0.1, "data_loading"),))
    fixed = consistency.enforce(report)
    assert fixed.recommendations == report.recommendations and fixed.stage_shares == report.stage_shares
    assert fixed.failed_checks == ("bounds",) and all("check bounds" in w for w in fixed.warnings)
    assert consistency.enforce(fixed) == fixed  # flagged once, however often it is read back
