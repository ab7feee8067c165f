"""The gate's decisions on real traces and on reports built in code."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.gate.compare import compare
from gpuscope.gate.config import GateConfig, parse_config
from gpuscope.gate.result import MetricResult
from gpuscope.model.report import Report
from tests.conftest import SAMPLES
from tests.gate.reports import analysed, report


def _by_key(metrics: tuple[MetricResult, ...]) -> dict[str, MetricResult]:
    return {m.key: m for m in metrics}


def test_loader_bound_candidate_fails_on_step_time_and_a_new_data_loading_bottleneck(
        workers4: Report, loader_bound: Report) -> None:
    result = compare(workers4, loader_bound)
    assert not result.passed
    metrics = _by_key(result.metrics)
    step = metrics["step_time"]
    assert step.status == "regression" and step.fails and step.change is not None and step.change > 0.2
    assert step.p_value is not None and step.p_value < 0.05 and "exact" in step.test
    neck = metrics["new_bottleneck"]
    assert neck.fails and (neck.baseline, neck.candidate) == ("host_overhead", "data_loading")
    assert any("DataLoader worker" in r for r in neck.recommendations)
    assert "DataLoader worker" in neck.reason
    assert metrics["data_loading_share"].fails and metrics["gpu_busy"].fails
    assert not metrics["peak_memory"].fails and not metrics["exposed_comm_share"].fails


def test_reverse_order_passes_and_reports_the_improvement(workers4: Report, loader_bound: Report) -> None:
    result = compare(loader_bound, workers4)
    assert result.passed and not result.failures
    metrics = _by_key(result.metrics)
    assert metrics["step_time"].status == "improvement" and (metrics["step_time"].change or 0) < -0.2
    assert metrics["data_loading_share"].status == "improvement"
    assert metrics["new_bottleneck"].status == "pass"  # host_overhead surfaced because the step got faster


def test_two_real_profiling_runs_of_one_configuration_pass(cpu_runs: tuple[Report, Report]) -> None:
    a, b = cpu_runs
    for base, cand in ((a, b), (b, a)):
        result = compare(base, cand)
        assert result.passed, result
        step = _by_key(result.metrics)["step_time"]
        assert result.baseline_steps >= 50 and step.status == "pass"
        assert _by_key(result.metrics)["gpu_busy"].status == "unknown"  # CPU-only traces: no GPU, no zero


def test_a_slowdown_within_noise_passes_and_a_clear_one_fails() -> None:
    base = report([100, 130, 95, 140, 105, 120, 98, 135], name="base")
    noisy = report([95, 160, 100, 170, 110, 140, 99, 150], name="noisy")  # +10.9% mean, heavily overlapping
    clear = report([d * 1.3 for d in [100, 130, 95, 140, 105, 120, 98, 135]], name="clear")
    noisy_step = _by_key(compare(base, noisy).metrics)["step_time"]
    assert noisy_step.status == "pass" and "noise" in noisy_step.reason and (noisy_step.change or 0) > 0.10
    assert not compare(base, clear).passed


def test_few_steps_fail_a_slowdown_they_cannot_test_unless_weak_tests_are_allowed() -> None:
    base, cand = report([100, 101, 102], name="b"), report([197, 199, 201], name="c")  # +97% on 3 vs 3 steps
    result = compare(base, cand)
    step = _by_key(result.metrics)["step_time"]
    # 3 vs 3 steps have 20 splits: the best p any data can give is 1/20, above alpha: the test cannot tell.
    assert not result.passed and step.fails and step.status == "weak" and step.significant is None
    assert "only 3 vs 3 steps" in step.reason and "profile at least 5 steady steps on each side" in step.reason
    assert result.steps_needed == 5 and any("weak" in n for n in result.notes)
    allowed = compare(base, cand, parse_config('weak = "pass"'))
    assert allowed.passed and allowed.allow_weak and _by_key(allowed.metrics)["step_time"].status == "weak"


def test_few_steps_never_fail_a_faster_run_or_a_change_within_its_threshold() -> None:
    base = report([100, 101, 102], name="b")
    assert compare(base, report([50, 51, 52], name="faster")).passed
    assert compare(base, report([105, 106, 107], name="within")).passed


def test_a_stall_every_fourth_step_fails_on_step_time_named_as_what_it_is() -> None:
    """16 steps of 30 ms against the same job with every 4th step 60 ms longer: +50% in the mean step. The stall
    recurs at a period, so periods are compared: 4 vs 4 cannot reach 1%, and the gate fails closed naming it;
    with 20 steps a side (5 periods) it is a regression beyond noise."""
    stall = [30_000.0 + (60_000.0 if i % 4 == 3 else 0.0) for i in range(20)]
    result = compare(report([30_000.0] * 16, name="b"), report(stall[:16], name="c"))
    step = _by_key(result.metrics)["step_time"]
    assert not result.passed and step.fails and step.change == pytest.approx(0.5)
    assert "every 4th step +60.0 ms: +15.0 ms a step on average" in step.reason
    assert "4 vs 4 periods of 4 steps" in step.reason and result.block == 4 and result.steps_needed == 20
    longer = compare(report([30_000.0] * 20, name="b"), report(stall, name="c"))
    step = _by_key(longer.metrics)["step_time"]
    assert step.status == "regression" and step.candidate == pytest.approx(45_000.0)


def test_a_uniformly_faster_run_passes_and_a_share_that_grows_only_as_the_rest_shrinks_is_shown() -> None:
    """45% faster, the DataLoader's time per step a little shorter: its share of the step grows 8 points, and that
    is no regression; a DataLoader that takes more time as well as more of the step is one."""
    base = report([100_000.0 + i for i in range(10)], name="b", loader_share=0.10)
    faster = report([55_000.0 + i for i in range(10)], name="c", loader_share=0.17)
    result = compare(base, faster)
    data = _by_key(result.metrics)["data_loading_share"]
    assert result.passed and data.change == pytest.approx(0.07) and data.status == "pass"
    assert "the rest of the step got faster" in data.reason
    assert (data.candidate_stage_us or 0) < (data.baseline_stage_us or 0)
    slower = report([110_000.0 + i for i in range(10)], name="c", loader_share=0.25)
    data = _by_key(compare(base, slower).metrics)["data_loading_share"]
    assert data.status == "regression" and data.fails
    # Twice as slow everywhere: the step time fails; the DataLoader's share held, so its row passes and says why.
    alike = compare(base, report([200_000.0 + 2 * i for i in range(10)], name="c", loader_share=0.10))
    data, step = _by_key(alike.metrics)["data_loading_share"], _by_key(alike.metrics)["step_time"]
    assert step.status == "regression" and data.status == "pass" and not data.fails
    # A larger share whose time grew less than the threshold: shown, and says which of the two passed it.
    grew = compare(base, report([80_000.0 + i for i in range(10)], name="c", loader_share=0.16))
    data = _by_key(grew.metrics)["data_loading_share"]
    assert data.status == "pass" and "only one of the two past the 5.0-point threshold" in data.reason


def test_one_or_two_steady_steps_fail_closed_whatever_the_direction() -> None:
    base = report([100.0] * 8, name="b")
    for kept in ([100.0], [50.0, 51.0], [200.0]):
        result = compare(base, report(kept, name="c"))
        assert not result.passed
        assert "too few to tell a typical step from a slow one" in _by_key(result.metrics)["step_time"].reason
    assert compare(base, report([100.0], name="c"), parse_config('weak = "pass"')).passed


def test_steps_needed_follows_alpha() -> None:
    """At alpha 0.001 neither 5 vs 5 steps (best p 1/252) nor 6 vs 6 (1/924 = 0.00108) can test; 7 vs 7
    (1/3432) can."""
    config = parse_config("alpha = 0.001")
    result = compare(report([100.0] * 6, name="b"), report([150.0] * 6, name="c"), config)
    assert result.steps_needed == 7 and not result.passed
    assert "profile at least 7 steady steps" in _by_key(result.metrics)["step_time"].reason
    assert compare(report([100.0] * 7, name="b"), report([150.0] * 7, name="c"), config).metrics[0].significant


def test_warm_up_steps_are_left_out() -> None:
    steady = [100.0, 102, 99, 101, 100, 103]
    base = report(steady, name="b")
    cand = report([5000.0, 4000.0, *steady], name="c", warmup=2)
    result = compare(base, cand)
    assert result.passed and result.candidate_steps == 6
    assert _by_key(result.metrics)["step_time"].change == 0.0
    assert "2 warm-up step(s) left out" in " ".join(result.notes)


def test_multi_rank_step_time_is_the_slowest_rank() -> None:
    two = report([100.0] * 6, name="two", ranks=2)
    slow = _replace_rank_steps(two, rank=1, factor=1.5)
    assert compare(two, two).passed
    step = _by_key(compare(two, slow).metrics)["step_time"]
    assert step.candidate == 150.0 and step.status == "regression"


def _replace_rank_steps(rep: Report, *, rank: int, factor: float) -> Report:
    ranks = list(rep.ranks)
    ranks[rank] = replace(ranks[rank], per_step=tuple(replace(s, duration_us=s.duration_us * factor)
                                                      for s in ranks[rank].per_step))
    return replace(rep, ranks=tuple(ranks))


def test_peak_memory_has_one_value_per_run_and_its_threshold_decides() -> None:
    base = report([100.0] * 6, name="b", peak_bytes=10 * 2**30)
    cand = report([100.0] * 6, name="c", peak_bytes=12 * 2**30)
    peak = _by_key(compare(base, cand).metrics)["peak_memory"]
    assert peak.fails and peak.p_value is None and peak.test == "one value per run"


def test_unknown_values_are_never_failed_nor_zero() -> None:
    base = report([100.0] * 6, name="b", usd_per_gpu_hour=None, busy=[None] * 6)
    result = compare(base, report([100.0] * 6, name="c"))
    cost = _by_key(result.metrics)["cost_per_1k_steps"]
    assert result.passed and cost.status == "unknown" and cost.baseline is None and cost.change is None


def test_disabled_metrics_are_not_reported() -> None:
    config = parse_config("[metrics.gpu_busy]\nenabled = false\n[metrics.new_bottleneck]\nenabled = false\n")
    keys = [m.key for m in compare(report([1.0] * 6), report([1.0] * 6), config).metrics]
    assert "gpu_busy" not in keys and "new_bottleneck" not in keys and "step_time" in keys


step_times = st.lists(st.floats(1.0, 1e6, allow_nan=False), min_size=0, max_size=12)
busy = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(step_times, busy, st.floats(0.0, 1.0), st.sampled_from(["gpu_compute", "data_loading", "communication"]),
       st.integers(0, 3), st.booleans())
def test_a_candidate_equal_to_its_baseline_never_fails(durations: list[float], busy_share: float,
                                                        loader: float, primary: str, warmup: int,
                                                        strict: bool) -> None:
    rep = report(durations, busy=[busy_share] * len(durations), loader_share=loader,
                 primary=primary, warmup=warmup, ranks=1 + warmup % 2)  # type: ignore[arg-type]
    config = parse_config('weak = "fail"') if strict else GateConfig()
    result = compare(rep, rep, config)
    steady = len(durations) - warmup
    if steady >= 3:
        assert not result.failures and result.passed and result.comparable
        assert all(m.status in ("pass", "unknown") for m in result.metrics)
    elif steady > 0:  # one or two steps tell no typical step from a slow one: it fails closed, and says why
        assert not result.passed and result.failures
        assert all(m.status == "weak" and "too few to tell" in m.reason for m in result.failures)
        allowed = compare(rep, rep, parse_config('weak = "pass"'))
        assert allowed.passed and not allowed.failures
    else:  # nothing steady to compare: the gate fails closed, and says so, instead of passing on nothing
        assert not result.passed and {m.code for m in result.mismatches} == {"no_steady_steps"}


def test_a_real_multi_rank_job_of_one_step_against_itself_passes_only_weak_tests_allowed() -> None:
    dlrm = analysed(SAMPLES / "dlrm_8rank")
    closed = compare(dlrm, dlrm)
    assert not closed.passed and "too few to tell" in _by_key(closed.metrics)["step_time"].reason
    result = compare(dlrm, dlrm, parse_config('weak = "pass"'))
    assert result.passed and result.baseline_steps == len({s.name for r in dlrm.ranks for s in r.per_step})
    assert any("the per-step tests are weak" in n for n in result.notes)
    step = _by_key(result.metrics)["step_time"]
    assert step.change == 0.0 and step.test.startswith("weak")
    assert step.candidate == max(s.duration_us for r in dlrm.ranks for s in r.per_step)


def test_cost_per_1000_steps_is_the_step_time_priced_and_tested_like_it() -> None:
    # One slow step: median 175, MAD 65, so 1,000 is past 175 + max(3.5 x 1.4826 x 65, 0.25 x 175) = 512: an
    # outlier, named on its own (Report.outlier_steps), and paid for: the step time is the mean of all six, 311.7.
    steps_us = [100.0, 300.0, 200.0, 1000.0, 150.0, 120.0]
    base = report(steps_us, name="b", ranks=2, usd_per_gpu_hour=3.0)
    cand = report([d * 1.5 for d in steps_us], name="c", ranks=2, usd_per_gpu_hour=3.0)
    metrics = _by_key(compare(base, cand).metrics)
    assert metrics["step_time"].baseline == pytest.approx(1870.0 / 6)
    # 311.7 µs a step, 2 GPUs at $3 per GPU-hour, 1,000 steps
    assert metrics["cost_per_1k_steps"].baseline == pytest.approx(1870.0 / 6 / 3.6e9 * 2 * 3.0 * 1000)
    assert metrics["cost_per_1k_steps"].change == pytest.approx(metrics["step_time"].change)
    assert metrics["cost_per_1k_steps"].p_value == pytest.approx(metrics["step_time"].p_value)
    assert all(m.definition for m in metrics.values())


def test_the_gate_compares_the_numbers_the_report_states(workers4: Report, loader_bound: Report) -> None:
    metrics = _by_key(compare(workers4, loader_bound).metrics)
    for key, rep in (("baseline", workers4), ("candidate", loader_bound)):
        facts, cost = rep.facts, rep.cost
        assert facts is not None and cost is not None
        assert getattr(metrics["step_time"], key) == facts.step_time_us
        assert getattr(metrics["gpu_busy"], key) == facts.gpu_busy
        assert getattr(metrics["cost_per_1k_steps"], key) == pytest.approx(cost.per_1k_steps_usd)
        assert getattr(metrics["data_loading_share"], key) == facts.data_wait_share


def test_gpu_busy_is_the_reports_own_figure() -> None:
    base = report([100.0] * 6, name="b", busy=[0.8, 0.8, 0.8, 0.2, 0.2, 0.2])
    assert base.ranks[0].gpu_busy == pytest.approx(0.5)
    assert _by_key(compare(base, base).metrics)["gpu_busy"].baseline == base.ranks[0].gpu_busy
