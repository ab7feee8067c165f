"""`gpuscope gate` end to end in a subprocess: exit codes, every output format, baselines from the store."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import msgspec
import pytest

from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

FAST = str(SAMPLES / "resnet50_workers4")
SLOW = str(SAMPLES / "resnet50_dataloader_bound")


class BenchmarkEntry(msgspec.Struct, forbid_unknown_fields=True):
    """One result of github-action-benchmark's customSmallerIsBetter input: name, unit, value, optional
    range and extra (the action's BenchmarkResult)."""

    name: str
    unit: str
    value: float
    range: str | None = None
    extra: str | None = None


def test_regression_exits_1_with_junit_benchmark_json_and_step_summary(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    junit, bench = tmp_path / "gate.xml", tmp_path / "bench.json"
    result = gpuscope("gate", SLOW, "--baseline", FAST, "--junit", str(junit), "--benchmark-json", str(bench),
                      home=tmp_path, GITHUB_STEP_SUMMARY=str(summary))
    assert result.returncode == 1, result.stderr
    assert "FAIL" in result.stdout and "new bottleneck data_loading" in result.stdout
    assert "Load batches in DataLoader worker processes" in result.stdout

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert {"step_time", "gpu_busy", "cost_per_1k_steps", "exposed_comm_share", "data_loading_share",
            "peak_memory", "new_bottleneck"} == set(cases)
    failed = {name for name, c in cases.items() if c.find("failure") is not None}
    assert {"step_time", "new_bottleneck"} <= failed and "peak_memory" not in failed
    assert suite.get("failures") == str(len(failed))
    step_failure = cases["step_time"].find("failure")
    assert step_failure is not None and "significant" in (step_failure.get("message") or "")

    entries = msgspec.json.decode(bench.read_bytes(), type=list[BenchmarkEntry])
    by_name = {e.name: e for e in entries}
    assert by_name["gpuscope step time (median)"].unit == "ms"
    assert by_name["gpuscope step time (median)"].value == pytest.approx(177.443)
    assert 0 < by_name["gpuscope GPU not busy"].value < 100

    text = summary.read_text()
    assert text.startswith("earlier step\n") and "### gpuscope gate: FAIL" in text
    assert r"| Step time \(median\) | 126.7 ms | 177.4 ms |" in text and "**FAIL**" in text


def test_improvement_passes_with_exit_0_and_json(tmp_path: Path) -> None:
    result = gpuscope("gate", FAST, "--baseline", SLOW, "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpuscope.gate/1" and doc["passed"] is True
    metrics = {m["key"]: m for m in doc["metrics"]}
    assert metrics["step_time"]["status"] == "improvement" and metrics["step_time"]["p_value"] < 0.05
    assert metrics["gpu_busy"]["baseline"] < metrics["gpu_busy"]["candidate"]


def test_baseline_from_the_store_and_from_a_saved_report(tmp_path: Path) -> None:
    saved = gpuscope("analyze", FAST, "--name", "main", "--json", home=tmp_path)
    assert saved.returncode == 0, saved.stderr
    report = tmp_path / "report.json"
    report.write_text(saved.stdout)
    runs = json.loads(gpuscope("runs", "--json", home=tmp_path).stdout)
    assert [r["name"] for r in runs] == ["main"] and runs[0]["status"] == "complete"

    by_name = gpuscope("gate", SLOW, "--baseline-from-store", "main", "--json", home=tmp_path)
    assert by_name.returncode == 1 and json.loads(by_name.stdout)["baseline"] == "main"
    by_id = gpuscope("gate", str(report), "--baseline", runs[0]["id"], "--json", home=tmp_path)
    assert by_id.returncode == 0, by_id.stderr
    steps = {m["key"]: m for m in json.loads(by_id.stdout)["metrics"]}["step_time"]
    assert steps["change"] == 0.0 and steps["status"] == "pass"


@pytest.mark.parametrize(("args", "words"), [
    (["gate", FAST], "--baseline"),
    (["gate", FAST, "--baseline", FAST, "--baseline-from-store", "main"], "--baseline"),
    (["gate", FAST, "--baseline", "/no/such/trace.json.gz"], "no such file"),
    (["gate", FAST, "--baseline-from-store", "nightly"], "no saved run named 'nightly'"),
    (["gate", FAST, "--baseline", FAST, "--config", "{bad}"], "gpuscope-gate"),
])
def test_usage_and_input_errors_exit_2_with_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    bad = tmp_path / "gpuscope-gate.toml"
    bad.write_text("alpha = 5\n")
    args = [str(bad) if a == "{bad}" else a for a in args]
    result = gpuscope(*args, home=tmp_path)
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert line.startswith("gpuscope: error: ") and words in line


def test_a_file_that_is_not_a_trace_exits_2(tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text('{"schema": "something else"}')
    result = gpuscope("gate", str(junk), "--baseline", FAST, home=tmp_path)
    assert result.returncode == 2 and "traceEvents" in one_clean_error_line(result)


def test_an_unwritable_step_summary_is_a_warning_and_the_verdict_stands(tmp_path: Path) -> None:
    result = gpuscope("gate", SLOW, "--baseline", FAST, home=tmp_path,
                      GITHUB_STEP_SUMMARY=str(tmp_path / "no" / "such" / "dir" / "summary.md"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("gpuscope: warning: ") and "cannot be written" in result.stderr
