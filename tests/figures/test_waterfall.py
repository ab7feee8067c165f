"""The waterfall of a change: from the baseline's step to the candidate's, bars that add up, small parts merged."""

from __future__ import annotations

import pytest

from gpuscope import figures
from gpuscope.changes import explain
from gpuscope.figures import Absent
from tests.analyzers.bundled import bundled_report
from tests.figures.fixtures import empty_report


def test_the_bars_go_from_one_step_to_the_other() -> None:
    d = explain(bundled_report("resnet50_workers4"), bundled_report("resnet50_dataloader_bound"))
    fig = figures.waterfall(d)
    assert not isinstance(fig, Absent)
    (trace,) = fig.data
    measure, x, y = list(trace.measure), list(trace.x), list(trace.y)
    assert measure[0] == "absolute" and measure[-1] == "total" and set(measure[1:-1]) == {"relative"}
    assert d.step_time_us.baseline is not None and d.step_time_us.candidate is not None
    assert y[0] == pytest.approx(d.step_time_us.baseline / 1000)
    assert y[-1] == pytest.approx(d.step_time_us.candidate / 1000)
    assert y[0] + sum(y[1:-1]) == pytest.approx(y[-1])
    assert x[1] == "data wait" and x[2] == "host / launch"  # largest change first
    # Parts under half a percent of the step are one bar: the compute families that barely moved.
    small = [p for p in d.parts if p.change_us and abs(p.change_us) < 0.005 * d.step_time_us.baseline]
    assert len(small) > 1 and x[-2] == f"{len(small)} smaller parts"


def test_no_steps_no_waterfall() -> None:
    d = explain(empty_report("a"), empty_report("b"))
    result = figures.waterfall(d)
    assert isinstance(result, Absent) and "profiler steps" in result.reason
