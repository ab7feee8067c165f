"""The new-bottleneck metric on reports built in code, where each answer is known by construction: a new stall stage
fails only when its share grew beyond noise and the step or its cost got worse beyond noise."""

from __future__ import annotations

import pytest

from gpuscope.gate.compare import compare
from gpuscope.gate.config import parse_config
from gpuscope.gate.result import MetricResult
from gpuscope.model.diagnosis import Recommendation
from gpuscope.model.report import Report
from tests.gate.reports import report

STEPS_US = [100.0, 101, 99, 102, 98, 100, 101, 99]
"""Eight steady steps of about 100 µs: step-to-step noise of about 1%."""
LOADER = Recommendation(code="dataloader_num_workers", title="Load batches in DataLoader worker processes",
                        detail="", est_step_saving=0.2, stage="data_loading")


def neck(base: Report, cand: Report, config: str = "") -> MetricResult:
    return next(m for m in compare(base, cand, parse_config(config)).metrics if m.key == "new_bottleneck")


def test_a_run_8_percent_faster_and_cheaper_passes_though_its_primary_stage_changed() -> None:
    """Data loading removed, the step 8% faster (beyond noise, within the 10% threshold) and 8% cheaper: host
    overhead is what is left, its share grown 20 points with every step. No failure."""
    base = report(STEPS_US, name="b", primary="data_loading",
                  shares={"data_loading": 0.40, "host_overhead": 0.10, "gpu_compute": 0.50})
    cand = report([d * 0.92 for d in STEPS_US], name="c", primary="host_overhead",
                  shares={"data_loading": 0.0, "host_overhead": 0.30, "gpu_compute": 0.70})
    result = compare(base, cand)
    by_key = {m.key: m for m in result.metrics}
    assert by_key["step_time"].change == pytest.approx(-0.08) and by_key["step_time"].significant
    assert by_key["cost_per_1k_steps"].change == pytest.approx(-0.08)
    m = by_key["new_bottleneck"]
    assert (m.baseline, m.candidate) == ("data_loading", "host_overhead") and m.change == pytest.approx(0.20)
    assert result.passed and m.status == "pass" and "did not get worse beyond noise" in m.reason


def test_a_new_stall_that_grew_beyond_noise_fails_when_the_step_got_worse_beyond_noise() -> None:
    """The step 5% slower in every step (beyond noise, within the 10% threshold, so the step-time row passes) and
    the DataLoader's share of each step up from about 10% to about 30%: the new bottleneck is the failure."""
    base = report(STEPS_US, name="b", loader_share=[0.10, 0.12, 0.09, 0.11, 0.10, 0.08, 0.12, 0.10])
    cand = report([d * 1.05 for d in STEPS_US], name="c", primary="data_loading",
                  loader_share=[0.30, 0.31, 0.29, 0.32, 0.28, 0.30, 0.31, 0.29], recommendations=(LOADER,))
    result = compare(base, cand)
    by_key = {m.key: m for m in result.metrics}
    assert by_key["step_time"].status == "pass" and by_key["step_time"].significant
    m = by_key["new_bottleneck"]
    assert m.change == pytest.approx(0.30 - 0.1025) and m.significant and m.p_value is not None
    # 8 vs 8 steps fully separated: 1 split of C(16, 8) = 12,870 is this extreme.
    assert m.p_value == pytest.approx(1 / 12870)
    assert not result.passed and m.fails and m.status == "regression"
    assert m.recommendations == (LOADER.title,) and LOADER.title in m.reason


def test_a_new_stall_whose_growth_is_within_step_to_step_noise_passes() -> None:
    """The DataLoader's share swings between 10% and 50% from step to step on both sides; its mean grows 7.5
    points, which shuffled steps reach often: within noise, whatever the step did."""
    base = report(STEPS_US, name="b", loader_share=[0.1, 0.5] * 4)
    cand = report([d * 1.05 for d in STEPS_US], name="c", primary="data_loading", loader_share=[0.2, 0.55] * 4)
    m = neck(base, cand)
    assert m.change == pytest.approx(0.075) and m.significant is False and m.p_value is not None
    assert m.status == "pass" and not m.fails and "within step-to-step noise" in m.reason


def test_a_slower_step_within_noise_does_not_make_a_new_stall_fail() -> None:
    """The step's mean moved up 2% but its steps overlap the baseline's: not worse beyond noise."""
    base = report([100.0, 110, 90, 105, 95, 100, 108, 92], name="b", loader_share=0.05)
    cand = report([102.0, 112, 92, 107, 97, 102, 110, 94], name="c", primary="data_loading", loader_share=0.30)
    m = neck(base, cand)
    assert m.status == "pass" and "did not get worse beyond noise" in m.reason


def test_too_few_steps_to_test_a_slower_step_with_a_new_stall_fails_unless_allowed() -> None:
    base = report([100.0, 101, 99], name="b", loader_share=0.05)
    cand = report([103.0, 104, 102], name="c", primary="data_loading", loader_share=0.30)
    m = neck(base, cand)
    assert m.fails and m.status == "weak" and "profile at least 5 steady steps on each side" in m.reason
    allowed = neck(base, cand, 'weak = "pass"')
    assert not allowed.fails and allowed.status == "weak"


def test_stages_that_swap_by_a_point_or_are_no_stall_pass() -> None:
    base = report(STEPS_US, name="b", primary="gpu_compute", shares={"data_loading": 0.30, "gpu_compute": 0.70})
    swapped = report([d * 1.05 for d in STEPS_US], name="c", primary="data_loading",
                     shares={"data_loading": 0.32, "gpu_compute": 0.68})
    assert neck(base, swapped).status == "pass"
    compute = report([d * 1.05 for d in STEPS_US], name="c", primary="gpu_compute")
    assert neck(swapped, compute).status == "pass"


def test_a_stage_measured_over_the_window_only_is_judged_by_its_threshold() -> None:
    """Idle (GPU gaps over 500 ms) has no per-step record: its growth of 20 points is judged by the threshold
    alone, and with the step 5% slower beyond noise it fails."""
    base = report(STEPS_US, name="b", shares={"idle": 0.05, "gpu_compute": 0.95})
    cand = report([d * 1.05 for d in STEPS_US], name="c", primary="idle",
                  shares={"idle": 0.25, "gpu_compute": 0.75})
    m = neck(base, cand)
    assert m.fails and m.test == "its share: one value per run" and m.p_value is None
