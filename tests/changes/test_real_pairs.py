"""The diff on real pairs of runs, against answers found without gpuscope: the TensorBoard plugin's own output for
the V100 ResNet-50 pair, the H200 loops' own clocks, and runs of one configuration (where nothing changed)."""

from __future__ import annotations

import json
import statistics
from functools import cache
from typing import Any

import pytest

from gpuscope.changes import DiffOptions, explain
from gpuscope.gate.config import GateConfig
from gpuscope.model.diff import Diff
from tests.analyzers.bundled import bundled_report
from tests.conftest import SAMPLES

EXPECTED = SAMPLES / "expected" / "tb_plugin_result_check_file.txt"
PLUGIN_LINE = {"resnet50_dataloader_bound": 0, "resnet50_workers4": 5}
ACTIVE = slice(7, 13)
"""The H200 loops' recorded steps (sample_traces/h200/record.py: 5 skipped, 2 warm-up)."""


@cache
def pair(baseline: str, candidate: str) -> Diff:
    return explain(bundled_report(baseline), bundled_report(candidate))


def plugin_means(sample: str) -> dict[str, float]:
    """The plugin's per-step rows of a trace, averaged over every step (the step time's statistic, an outlier
    included): its step total and each of its columns, in µs."""
    steps = json.loads(EXPECTED.read_text().splitlines()[PLUGIN_LINE[sample]])["steps"]
    names = [c.get("name", "") for c in steps["columns"]]
    numeric = [i for i, c in enumerate(steps["columns"]) if c["type"] == "number"]
    rows = steps["rows"]
    means = {names[i]: statistics.fmean(row[i] for row in rows) for i in numeric}
    means["total"] = statistics.fmean(sum(row[i] for i in numeric) for row in rows)
    return means


def loop(variant: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SAMPLES / "h200" / "measured" / f"{variant}.json").read_text())
    return doc


def loop_ms(variant: str, key: str) -> float:
    return statistics.fmean(loop(variant)["measured_by_the_loop"][key][ACTIVE]) * 1000


def stage(d: Diff, name: str) -> float:
    return sum(p.change_us for p in d.parts if p.stage == name)


def test_workers4_to_num_workers_0_is_mostly_the_data_wait_and_is_priced() -> None:
    d = pair("resnet50_workers4", "resnet50_dataloader_bound")
    before, after = plugin_means("resnet50_workers4"), plugin_means("resnet50_dataloader_bound")
    assert d.step_time_us.baseline == pytest.approx(before["total"], abs=0.5)  # the plugin prints whole µs
    assert d.step_time_us.candidate == pytest.approx(after["total"], abs=0.5)
    assert d.change_us is not None and d.change_us == pytest.approx(after["total"] - before["total"], abs=1.0)
    assert stage(d, "data_loading") == pytest.approx(after["DataLoader"] - before["DataLoader"], abs=1.0)
    assert sum(p.change_us for p in d.parts) == pytest.approx(d.change_us, rel=0.05)
    assert stage(d, "data_loading") >= 0.7 * d.change_us
    # Six steady steps a side: past the gate's 5, and the change is beyond noise; asked for 7, it is not tested.
    assert d.significant is True
    seven = explain(bundled_report("resnet50_workers4"), bundled_report("resnet50_dataloader_bound"),
                    DiffOptions(config=GateConfig(min_steps=7)))
    assert seven.significant is None
    assert [s.key for s in d.setup_changes] == ["dataloader"]
    # A month at the V100's catalog price: the baseline's 730 hours on its one GPU, as many times dearer as its
    # steps got longer by the plugin's numbers.
    price = bundled_report("resnet50_dataloader_bound").cost
    assert price is not None and price.usd_per_gpu_hour is not None
    assert d.usd_per_month == pytest.approx(730 * price.usd_per_gpu_hour * (after["total"] / before["total"] - 1),
                                            rel=1e-4)
    loader = next(k for k in d.operators if k.family == "enumerate(DataLoader) next batch")
    assert loader.match == "family" and loader.change_us > 0.9 * stage(d, "data_loading")
    assert len(d.kernels) == len(d.operators) == 20


@pytest.mark.parametrize("sample", ["resnet50_workers4", "resnet50_dataloader_bound"])
def test_on_one_rank_the_parts_are_the_reports_stage_shares_of_its_step(sample: str) -> None:
    report = bundled_report(sample)
    d = explain(report, report)
    assert d.change_us == 0.0 and all(p.change_us == 0.0 for p in d.parts)
    step = d.step_time_us.baseline
    assert step is not None
    for name in ("data_loading", "memory", "gpu_compute", "host_overhead"):
        share = report.stage_shares[name]
        assert share is not None
        assert sum(p.baseline_us for p in d.parts if p.stage == name) / step == pytest.approx(share, abs=1e-9)


def test_h200_workers0_to_12_against_the_loops_clocks() -> None:
    d = pair("h200/resnet50_workers0", "h200/resnet50_workers12")
    measured_change = loop_ms("resnet50_workers12", "wall_s_per_step") - loop_ms("resnet50_workers0",
                                                                                  "wall_s_per_step")
    waited_change = loop_ms("resnet50_workers12", "data_wait_s_per_step") - loop_ms("resnet50_workers0",
                                                                                     "data_wait_s_per_step")
    assert d.change_us is not None and d.change_us / 1000 == pytest.approx(measured_change, rel=0.02)
    assert stage(d, "data_loading") / 1000 == pytest.approx(waited_change, rel=0.05)
    assert d.significant is True
    config = loop("resnet50_workers0")["config"]
    items = {s.key: s for s in d.setup}
    assert items["dataloader"].changed is True
    assert items["batch_shape"].changed is False and items["batch_shape"].baseline is not None
    assert items["batch_shape"].baseline.startswith(f"[{config['batch']}, 3, 224, 224]")
    assert items["cuda_runtime"].baseline == loop("resnet50_workers0")["cuda"] == items["cuda_runtime"].candidate
    assert "bfloat16" in (items["dtypes"].baseline or "")  # recorded under bf16 autocast
    assert items["gpu_model"].baseline == loop("resnet50_workers0")["gpu"]
    # The loader with workers hands over pinned batches: the copy kernel changed by family, not by name.
    (copy,) = [k for k in d.kernels if k.family == "memory"]
    assert copy.name == "Memcpy HtoD (Pageable -> Device) -> Memcpy HtoD (Pinned -> Device)"


@pytest.mark.parametrize(("baseline", "candidate"), [("cpu_mlp_aa/run_a", "cpu_mlp_aa/run_b"),
                                                     ("h200/resnet50_workers12", "h200/resnet50_workers12_b")])
def test_two_runs_of_one_configuration_change_nothing_beyond_noise(baseline: str, candidate: str) -> None:
    d = pair(baseline, candidate)
    assert d.parts and not [p.label for p in d.parts if p.significant]
    assert d.significant is not True
    assert d.setup_changes == ()
    assert not [k.name for k in d.kernels if k.match in ("appeared", "disappeared")]


def test_old_and_new_schema_of_one_job_show_no_change_from_the_format() -> None:
    """Two recordings of the num_workers=0 job, one in the Kineto schema of early 2021: their steps differ (the
    loader waited longer in the later one), but no kernel appears or vanishes and no set-up changes because of how
    it was written. (Host operators do differ where the PyTorch versions did: the later one's aten::relu_ calls
    aten::clamp_min_, which the earlier one's does not.)"""
    d = pair("resnet50_old_schema", "resnet50_dataloader_bound")
    base = d.step_time_us.baseline
    assert base is not None
    assert d.setup_changes == ()
    assert {s.key for s in d.setup if s.changed is None} >= {"gpu_model", "dtypes"}  # the old schema does not say
    assert not [k.name for k in d.kernels if k.match in ("appeared", "disappeared") and abs(k.change_us) > 0.005 * base]
    loader = next(k for k in d.operators if k.family == "enumerate(DataLoader) next batch")
    assert loader.match == "name"
    assert abs(stage(d, "gpu_compute")) < 0.02 * base and abs(stage(d, "memory")) < 0.01 * base
    assert stage(d, "data_loading") > 0  # the real difference between the recordings
