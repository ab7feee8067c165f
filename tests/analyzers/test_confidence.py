"""Confidence means something: it grows with the steps that support the verdict, and the verdict's words follow it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.analyzers.report import build_report
from gpuscope.api.analysis import trace_run_meta
from gpuscope.model.report import Report
from gpuscope.model.run import Run
from gpuscope.traces import load
from tests.analyzers.bundled import bundled_report
from tests.builders import cpu_op, kernel, launch, simple_training, step, trace, write


def report_of(tmp_path: Path, events: list[dict[str, object]]) -> Report:
    path = write(tmp_path / "t.json", trace(events))
    loaded = load(path)
    return build_report(Run(meta=trace_run_meta(loaded.traces, name="t"), traces=loaded.traces))


def test_one_step_never_gives_more_than_half_and_says_it_is_one_step(tmp_path: Path) -> None:
    # Each step: 600 µs waiting on the DataLoader, 300 µs kernel: as clear a data-loading case as a step can be.
    one = report_of(tmp_path, simple_training(1, step_us=1000, loader_us=600, kernel_us=300))
    assert one.verdict.primary == "data_loading"
    assert one.verdict.confidence <= 0.5
    assert one.verdict.summary.startswith("From 1 profiled step only")


def test_a_trace_without_steps_says_so_not_a_count_of_steps() -> None:
    """Two ranks of an Nsight Systems export without profiler steps: two windows, which are no profiled steps;
    eight ranks of one profiled step each: one step, not eight."""
    assert bundled_report("nsys/ddp53_profile.sqlite").verdict.summary.startswith(
        "From a trace without profiler steps (profile a few steps for a firmer answer): ")
    dlrm = bundled_report("dlrm_8rank").verdict.summary
    assert "profiled step" not in dlrm or dlrm.startswith("From 1 profiled step only")


def test_more_agreeing_steps_give_more_confidence(tmp_path: Path) -> None:
    few = report_of(tmp_path, simple_training(2, step_us=1000, loader_us=600, kernel_us=300)).verdict.confidence
    many = report_of(tmp_path, simple_training(20, step_us=1000, loader_us=600, kernel_us=300)).verdict.confidence
    # The margin over the runner-up (host 10% against the loader's 60%: 1 - 1/6) times n / (n + 1).
    assert few == pytest.approx((1 - 1 / 6) * 2 / 3, abs=0.02)
    assert many == pytest.approx((1 - 1 / 6) * 20 / 21, abs=0.02)


def test_steps_that_disagree_lower_the_confidence(tmp_path: Path) -> None:
    """Ten steps: in six the loader holds 60% of the step, in four only 5% (the host's 45% leads there): the
    data-loading verdict stands on 6 of 10 steps and is worded as less than certain."""
    events: list[dict[str, object]] = []
    for i in range(10):
        t0, loader = i * 1000.0, 600.0 if i % 5 < 3 else 50.0
        events += [step(i, t0, 1000), cpu_op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0, loader),
                   cpu_op("aten::conv2d", t0 + loader, 50), launch(t0 + loader + 10, 20, 5000 + i),
                   kernel("volta_sgemm_128x64_nn", t0 + loader + 40, 300, 5000 + i)]
    r = report_of(tmp_path, events)
    assert r.verdict.primary == "data_loading"
    assert r.verdict.evidence["supporting_steps"] == "6 of 10"
    assert r.verdict.confidence < 0.6
    assert not r.verdict.summary.startswith("The GPU waits")


def test_a_near_tie_is_worded_as_a_close_call_naming_both() -> None:
    """The DLRM sample: communication 44% against host overhead 43%: both named with their shares."""
    v = bundled_report("dlrm_8rank").verdict
    assert v.primary == "communication" and v.confidence < 0.1
    assert v.summary.startswith("A close call between communication (44%) and waiting on the CPU")
    assert "(43%)" in v.summary


def test_a_clear_verdict_is_stated_flatly() -> None:
    """The H200 ResNet-50 with num_workers=0: the loop itself measured 85% of its time waiting for batches."""
    v = bundled_report("h200/resnet50_workers0").verdict
    assert v.primary == "data_loading" and v.confidence >= 0.7
    assert v.summary.startswith("The GPU waits for input data")
