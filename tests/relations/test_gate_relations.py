"""The gate and diff under transformed real traces (docs/relations.md, "Steps, the gate and diff"): a stall added
to every n-th step raises the step time by k x (steps hit) / (steps) and fails the gate past its threshold; every
event twice as fast passes the gate and is faster in every part of the diff; a profile cut to one step fails the
gate closed. Each relation runs over bundled traces with profiler steps (CPU jobs among them); where one cannot hold
for a trace, the test says why."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.diagnosis.facts import job_step_times_us, job_steps
from gpuscope.analyzers.trace.step_stats import periodic_chance
from gpuscope.changes import explain
from gpuscope.format import ordinal
from gpuscope.gate.compare import compare
from gpuscope.gate.config import GateConfig
from gpuscope.gate.result import MetricResult
from gpuscope.model.report import Report
from tests import reference
from tests.analyzers.bundled import bundled_report
from tests.conftest import SAMPLES
from tests.relations import transforms as tf

SMALL = ("cpu_checkpoint_outlier", "cpu_gloo_ddp", "gloo_4rank/balanced", "h200/pageable_h2d")
"""Bundled traces with profiler steps that are cheap to rewrite: three CPU jobs (one rank with a checkpoint
outlier, 4 gloo ranks twice) and an H200 one: the relations with a parameter run over these."""
TRACES = (*SMALL, "h200/decode_bs4", "resnet50_dataloader_bound")
"""With an H200 decode loop and a V100 training job: the relations with none. The larger H200 traces are left to
the cheaper relations of test_step_relations.py (docs/relations.md)."""
THRESHOLD = GateConfig().metric("step_time").threshold
FAILS = {"regression", "weak"}


def steady_names(report: Report) -> list[str]:
    """The job's steady steps by name, in time order."""
    return [records[0].name for records in job_steps(report.ranks)]


def step_time(result_metrics: tuple[MetricResult, ...]) -> MetricResult:
    return next(m for m in result_metrics if m.key == "step_time")


def skip_unless_steps(report: Report, name: str) -> None:
    if len(steady_names(report)) < 3:
        pytest.skip(f"{name}: fewer than 3 steady steps, on which the gate fails closed whatever the change")


@pytest.mark.parametrize("name", SMALL)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(every=st.integers(2, 5), k=st.floats(0.05, 2.0))
def test_a_stall_every_nth_step_raises_the_step_time_by_k_over_n_and_fails_past_the_threshold(
        name: str, every: int, k: float, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The stall is beyond the steps' noise (each stalled step past the slow-step threshold of the steps, by k
    median steps more). Where it recurs at a period the steps can tell (3 times or more, a pattern chance would
    rarely give), past the threshold the gate fails: a regression, or too few periods to test it (fail closed),
    never "noise". Where it cannot be told from slow steps falling at random (twice in a window, or every other
    step of six, where the slow steps are half the steps), the permutation test decides and the reason names the
    slow steps it tells; within the threshold the step-time row passes."""
    base = bundled_report(name)
    skip_unless_steps(base, name)
    steady = steady_names(base)
    hit = steady[every - 1::every]
    times = job_step_times_us(base.ranks)
    assert base.facts is not None and base.facts.step_time_us is not None
    limit = reference.slow_threshold_us(times)
    assert limit is not None
    k_us = limit - min(times) + k * statistics.median(times)
    cand = tf.analysed(tf.transformed(SAMPLES / name, tmp_path_factory.mktemp("stall") / "t",
                                      lambda doc: tf.stall(doc, hit, k_us)))
    assert cand.facts is not None and cand.facts.step_time_us is not None
    assert steady_names(cand) == steady
    # The mean of every steady step, so exactly k x (steps hit) / (steps) more: µs timestamps read to the ns.
    raised = cand.facts.step_time_us - base.facts.step_time_us
    assert raised == pytest.approx(k_us * len(hit) / len(steady), abs=1e-3 * len(steady))
    result = compare(base, cand)
    step = step_time(result.metrics)
    change = raised / base.facts.step_time_us
    assert step.change == pytest.approx(change, rel=1e-9)
    told = (cand.facts.recurring is not None and cand.facts.recurring.period == every
            and [str(x) for x in cand.facts.recurring.steps] == hit)
    if change <= THRESHOLD:
        assert step.status == "pass" and not step.fails
    elif told:  # a stall at a period told: a regression, or too few periods to test it (failed closed)
        assert periodic_chance(len(steady), len(hit)) < 0.01 and f"every {ordinal(every)} step +" in step.reason
        if base.outlier_steps and step.status == "pass":
            # The baseline's outlier (cpu_checkpoint_outlier's checkpoint save) makes its period the longest of
            # both runs': 6 vs 6 periods of 2 steps cannot tell the stall from it at 1%; the reason names both.
            assert "is an outlier" in step.reason
        else:
            assert not result.passed and step.fails and step.status in FAILS, step.reason
    else:  # no period told: the permutation test decides, and the reason says what the slow steps are
        assert not step.within_threshold
        if cand.facts.recurring is not None or cand.outlier_steps:
            assert "outlier" in step.reason or "steps +" in step.reason or "every" in step.reason, step.reason


@pytest.mark.parametrize("name", TRACES)
def test_every_event_twice_as_fast_passes_the_gate_and_is_faster_in_every_part(
        name: str, tmp_path: Path) -> None:
    base = bundled_report(name)
    skip_unless_steps(base, name)
    fast = tf.analysed(tf.transformed(SAMPLES / name, tmp_path / "t", lambda doc: tf.scale(doc, 0.5)))
    assert base.facts is not None and fast.facts is not None and base.facts.step_time_us is not None
    assert steady_names(fast) == steady_names(base)
    assert fast.facts.step_time_us == pytest.approx(base.facts.step_time_us / 2, rel=1e-4)
    result = compare(base, fast)
    assert result.passed, [m.reason for m in result.failures]
    assert step_time(result.metrics).status in ("improvement", "weak", "pass")
    diff = explain(base, fast)
    assert diff.change_us is not None and diff.change_us < 0
    moved = [p for p in diff.parts if p.baseline_us > 1e-6 * (diff.step_time_us.baseline or 0)]
    assert moved and all(p.change_us < 0 for p in moved), [(p.label, p.change_us) for p in moved]
    assert all(p.candidate_us == pytest.approx(p.baseline_us / 2, rel=1e-3, abs=1e-3) for p in diff.parts)


@pytest.mark.parametrize("name", (*SMALL, "h200/decode_bs4", "dlrm_8rank"))
def test_a_profile_cut_to_one_step_fails_the_gate_closed(name: str, tmp_path: Path) -> None:
    base = bundled_report(name)
    steady = steady_names(base)
    one = steady[len(steady) // 2]  # the middle steady step: a typical one, as fast as the job usually is
    cut = tf.analysed(tf.transformed(SAMPLES / name, tmp_path / "t", lambda doc: tf.keep_steps(doc, [one])))
    assert steady_names(cut) == [one]
    for baseline, candidate in ((base, cut), (cut, base)):
        result = compare(baseline, candidate)
        step = step_time(result.metrics)
        assert not result.passed and step.fails and step.status == "weak"
        assert "too few to tell a typical step from a slow one" in step.reason
