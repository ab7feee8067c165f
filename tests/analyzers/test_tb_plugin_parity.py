"""The step breakdown against the TensorBoard profiler plugin's own expected output for the same traces."""

from __future__ import annotations

import json
from functools import cache

import pytest

from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.model.rank import RankReport
from gpuscope.traces import read_trace
from tests.conftest import SAMPLES

EXPECTED = SAMPLES / "expected" / "tb_plugin_result_check_file.txt"
CASES = {"resnet50_dataloader_bound": 0, "resnet50_workers4": 5}  # line of each trace's overview
COLUMNS = {"Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset", "Runtime": "runtime",
           "DataLoader": "dataloader", "CPU Exec": "cpu_exec", "Other": "other"}


@cache
def overview(line: int) -> dict[str, object]:
    return json.loads(EXPECTED.read_text().splitlines()[line])  # type: ignore[no-any-return]


@cache
def rank(sample: str) -> RankReport:
    return analyze_rank(read_trace(next((SAMPLES / sample).glob("*.json.gz"))))


@pytest.mark.parametrize("sample", CASES)
def test_every_step_equals_the_plugin_to_the_microsecond(sample: str) -> None:
    expected = overview(CASES[sample])["steps"]
    names = [c.get("name") for c in expected["columns"]]  # type: ignore[index]
    got = rank(sample)
    assert [s.name for s in got.per_step] == [row[0] for row in expected["rows"]]  # type: ignore[index]
    for row, step in zip(expected["rows"], got.per_step):  # type: ignore[index]
        total = sum(v for n, v in zip(names, row) if n in COLUMNS)
        # The plugin prints whole microseconds.
        assert abs(step.duration_us - total) <= 0.5, step.name
        for column, key in COLUMNS.items():
            want = row[names.index(column)]
            assert abs(getattr(step.breakdown_us, key) - want) <= 0.5, (step.name, column)


@pytest.mark.parametrize("sample", CASES)
def test_mean_step_and_gpu_utilization_match_the_plugin(sample: str) -> None:
    perf = overview(CASES[sample])["performance"][0]  # type: ignore[index]
    got = rank(sample)
    assert got.step_time_us is not None and abs(got.step_time_us - perf["value"]) <= 0.5
    for child in perf["children"]:
        share = getattr(got.step_breakdown_us, COLUMNS[child["name"]]) / got.step_time_us
        assert share * 100 == pytest.approx(child["extra"], abs=0.005), child["name"]  # printed to 0.01%
    gpu = {d["title"]: d["value"] for d in overview(CASES[sample])["gpu_metrics"]["data"]}  # type: ignore[index]
    assert got.kernel_utilization is not None and got.sm_efficiency is not None
    assert got.kernel_utilization * 100 == pytest.approx(float(gpu["GPU Utilization"].rstrip(" %")), abs=0.5)
    assert got.sm_efficiency * 100 == pytest.approx(float(gpu["Est. SM Efficiency"].rstrip(" %")), abs=0.5)


def test_dataloader_share_of_the_starved_job_is_the_plugins_33_4_percent() -> None:
    got = rank("resnet50_dataloader_bound")
    assert got.step_time_us is not None
    assert got.step_breakdown_us.dataloader / got.step_time_us == pytest.approx(0.334, abs=0.0005)
