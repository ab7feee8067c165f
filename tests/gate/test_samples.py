"""The gate's per-step samples are the facts it names, taken step by step: checked against the TensorBoard plugin's
own per-step output, against reports built by hand, and against the report's values on the bundled traces."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from gpuscope.analyzers.diagnosis.facts import facts_of, job_step_times_us
from gpuscope.gate.metrics import SPECS, side
from gpuscope.gate.samples import job_steps
from gpuscope.model.report import Report
from tests.analyzers.bundled import bundled_report
from tests.conftest import SAMPLES
from tests.gate.reports import rank, report, step

EXPECTED = SAMPLES / "expected" / "tb_plugin_result_check_file.txt"


def plugin_rows(line: int) -> list[dict[str, float]]:
    """The plugin's per-step rows (µs) of one trace: each column by name, and the step's total."""
    steps = json.loads(EXPECTED.read_text().splitlines()[line])["steps"]
    names = [c.get("name", "") for c in steps["columns"]]
    numeric = [i for i, c in enumerate(steps["columns"]) if c["type"] == "number"]
    rows = [{names[i]: float(row[i]) for i in numeric} for row in steps["rows"]]
    return [{**row, "total": sum(row.values())} for row in rows]


def test_step_and_data_wait_samples_are_the_plugins_own_per_step_numbers() -> None:
    """num_workers=0 on one V100 (the plugin's first line): the step-time samples are the plugin's step totals, and
    the data-wait samples its DataLoader share of each step (the data wait has no window-level part)."""
    rows = plugin_rows(0)
    steps = job_steps(bundled_report("resnet50_dataloader_bound"))
    totals = [r["total"] for r in rows]
    assert steps.duration_us == pytest.approx(totals, abs=0.5)  # the plugin prints whole µs
    assert steps.share("data_loading") == pytest.approx([r["DataLoader"] / r["total"] for r in rows], abs=1e-5)


@pytest.mark.parametrize("name", ["resnet50_dataloader_bound", "resnet50_workers4", "resnet50_old_schema",
                                  "dlrm_8rank", "cpu_mlp_aa/run_a"])
def test_the_samples_come_back_to_the_values_the_gate_compares(name: str) -> None:
    """One rank: each step's share weighted by its length is the report's share (the window-level part added to
    every step); one step (dlrm's 8 ranks): the one sample is the report's share. The step times are the facts'."""
    report = bundled_report(name)
    s = side(report)
    assert list(s.steps.duration_us) == job_step_times_us(report.ranks)  # the steps the step time is the mean of
    assert float(s.steps.duration_us.mean()) == pytest.approx(facts_of(report).step_time_us)
    weights = s.steps.duration_us if len(report.ranks) == 1 else np.ones(len(s.steps))
    assert len(report.ranks) == 1 or len(s.steps) == 1
    values = {"gpu_busy": facts_of(report).gpu_busy, **report.stage_shares}
    for key, value in values.items():
        found = s.steps.gpu_busy if key == "gpu_busy" else s.steps.share(key)  # type: ignore[arg-type]
        if found is not None and value is not None:
            # GPU busy is taken over the steady window, which may hold a gap between steps the steps do not.
            tolerance = 1e-3 if key == "gpu_busy" else 1e-12
            assert float(np.average(found, weights=weights)) == pytest.approx(value, abs=tolerance), key
    assert [spec.samples(s) is not None for spec in SPECS][:2] == [True, facts_of(report).gpu_busy is not None]
    typical = facts_of(report).typical_step_us or 0.0
    for stage in ("data_loading", "communication"):
        time, share = s.steps.stage_time(stage), report.stage_shares.get(stage)  # type: ignore[arg-type]
        if time is not None and share is not None and len(report.ranks) == 1:
            # The share's numerator: its time per typical step comes back to the share x the typical step.
            assert float(time.mean()) == pytest.approx(share * typical, rel=1e-9, abs=1e-6), stage


def two_ranks(loader_us: tuple[list[float], list[float]], windows_us: tuple[float, float], share: float,
              busy: tuple[float, float] = (0.8, 0.8)) -> Report:
    ranks = tuple(replace(rank([step(i, 100.0, busy=busy[r], loader_share=us / 100.0)
                                for i, us in enumerate(loader_us[r])], number=r), window_us=windows_us[r],
                          steady_window_us=windows_us[r])
                  for r in range(2))
    base = report([100.0] * len(loader_us[0]), ranks=2, shares={"data_loading": share})
    return replace(base, ranks=ranks, facts=None)


def test_a_stage_share_weighs_ranks_by_their_windows_as_the_verdict_does() -> None:
    """Rank 0 (window 300 µs) waits 40 then 60 µs of its 100 µs steps for data, rank 1 (window 100 µs) 10 each
    step: per step 0.75 x 0.4 + 0.25 x 0.1 = 0.325 and 0.75 x 0.6 + 0.25 x 0.1 = 0.475; their mean, 0.4, is the
    share the verdict computes, so nothing is spread over the steps."""
    report = two_ranks(([40.0, 60.0], [10.0, 10.0]), (300.0, 100.0), share=0.4)
    assert job_steps(report).share("data_loading") == pytest.approx([0.325, 0.475])


def test_a_long_step_weighs_as_one_step_in_the_samples() -> None:
    """Step 1 of rank 0 lasts 300 µs with 60 µs of DataLoader: its own share is 0.2, whatever its length."""
    ranks = (rank([step(0, 100.0, loader_share=0.4), step(1, 300.0, loader_share=0.2)]),)
    base = report([100.0, 300.0])
    found = job_steps(replace(base, ranks=ranks, stage_shares={"data_loading": 0.3}, facts=None)).share("data_loading")
    assert found is not None and found - found.mean() == pytest.approx([0.1, -0.1])


def test_what_no_step_holds_is_spread_evenly_over_the_steps() -> None:
    """The same ranks, the report's share 0.5: the 0.1 the steps do not hold (a window-level wait) is added to
    every step, so the samples still average to the share the table shows."""
    report = two_ranks(([40.0, 60.0], [10.0, 10.0]), (300.0, 100.0), share=0.5)
    assert job_steps(report).share("data_loading") == pytest.approx([0.425, 0.575])


def test_gpu_busy_weighs_ranks_by_their_gpu_time_as_the_facts_do() -> None:
    """Rank 0 busy 0.9 over a 300 µs window, rank 1 busy 0.1 over 100 µs: 0.75 x 0.9 + 0.25 x 0.1 = 0.7, in every
    step and in the facts."""
    report = two_ranks(([0.0, 0.0], [0.0, 0.0]), (300.0, 100.0), share=0.0, busy=(0.9, 0.1))
    assert facts_of(report).gpu_busy == pytest.approx(0.7)
    samples = job_steps(report).gpu_busy
    assert samples is not None and samples == pytest.approx([0.7, 0.7])


def test_idle_has_no_per_step_samples() -> None:
    report = two_ranks(([0.0, 0.0], [0.0, 0.0]), (300.0, 100.0), share=0.0)
    report = replace(report, stage_shares={**report.stage_shares, "idle": 0.2})
    assert job_steps(report).share("idle") is None
