"""`gpuscope gate` end to end in a subprocess: exit codes, every output format, baselines from the store."""

from __future__ import annotations

import json
import statistics
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from gpuscope.model.report import Report
from tests import builders as b
from tests import reference
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES
from tests.gate import edits

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


def test_regression_exits_1_with_junit_benchmark_json_and_step_summary(tmp_path: Path, workers4: Report,
                                                                       loader_bound: Report) -> None:
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
    assert {"comparable", "step_time", "gpu_busy", "cost_per_1k_steps", "exposed_comm_share", "data_loading_share",
            "peak_memory", "new_bottleneck"} == set(cases)
    failed = {name for name, c in cases.items() if c.find("failure") is not None}
    assert {"step_time", "new_bottleneck"} <= failed and not {"peak_memory", "comparable"} & failed
    assert suite.get("failures") == str(len(failed))
    step_failure = cases["step_time"].find("failure")
    assert step_failure is not None and "significant" in (step_failure.get("message") or "")
    step_out = cases["step_time"].find("system-out")
    assert step_out is not None and "measured as: mean of all the job's steady steps" in (step_out.text or "")
    assert "measured as:" in result.stdout and "the ranks' GPUs x the price per GPU-hour" in result.stdout

    entries = msgspec.json.decode(bench.read_bytes(), type=list[BenchmarkEntry])
    by_name = {e.name: e for e in entries}
    # One rank: the job's steps are its steady profiler steps, and the step time the mean of those that are not
    # outliers (two of the workers4 run's six are).
    slow_ms, fast_ms = (statistics.fmean(reference.typical_steps_us([s.duration_us for s in r.ranks[0].per_step
                                                                     if not s.warmup])) / 1000
                        for r in (loader_bound, workers4))
    assert by_name["gpuscope step time (mean)"].unit == "ms"
    assert by_name["gpuscope step time (mean)"].value == pytest.approx(slow_ms, abs=1e-3)
    assert by_name["gpuscope not comparable"].value == 0
    assert 0 < by_name["gpuscope GPU not busy"].value < 100

    text = summary.read_text()
    assert text.startswith("earlier step\n") and "### gpuscope gate: FAIL" in text
    assert f"| Step time \\(mean\\) | {fast_ms:.1f} ms | {slow_ms:.1f} ms |" in text and "**FAIL**" in text


def test_improvement_passes_with_exit_0_and_json(tmp_path: Path) -> None:
    result = gpuscope("gate", FAST, "--baseline", SLOW, "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpuscope.gate/1" and doc["passed"] is True
    metrics = {m["key"]: m for m in doc["metrics"]}
    assert metrics["step_time"]["status"] == "improvement" and metrics["step_time"]["p_value"] < 0.05
    assert metrics["gpu_busy"]["baseline"] < metrics["gpu_busy"]["candidate"]
    # 4 workers against 0: data loading gone, host overhead is what is left of a faster, cheaper step.
    neck = metrics["new_bottleneck"]
    assert (neck["baseline"], neck["candidate"]) == ("data_loading", "host_overhead")
    assert neck["status"] == "pass" and not neck["fails"]


def _three_steps(tmp_path: Path) -> tuple[str, str]:
    """Two hand-built traces of 3 profiler steps: 1.0 ms steps, and 1.97 ms ones (the DataLoader 970 µs
    longer): +97% step time."""
    base = b.write(tmp_path / "base.json", b.trace(b.simple_training(3, step_us=1000.0, loader_us=300.0)))
    cand = b.write(tmp_path / "cand.json", b.trace(b.simple_training(3, step_us=1970.0, loader_us=1270.0)))
    return str(base), str(cand)


def test_three_steps_against_three_with_97_percent_slower_steps_fail_saying_how_many_to_profile(
        tmp_path: Path) -> None:
    base, cand = _three_steps(tmp_path)
    result = gpuscope("gate", cand, "--baseline", base, "--json", home=tmp_path)
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    step = {m["key"]: m for m in doc["metrics"]}["step_time"]
    assert step["change"] == pytest.approx(0.97) and step["status"] == "weak" and step["fails"]
    assert "profile at least 5 steady steps on each side" in step["reason"]
    assert doc["passed"] is False and doc["steps_needed"] == 5 and doc["allow_weak"] is False
    shown = gpuscope("gate", cand, "--baseline", base, home=tmp_path)
    verdict = next(line for line in shown.stdout.splitlines() if line.startswith("FAIL"))
    assert shown.returncode == 1 and "profile at least 5 steady steps on each side" in verdict
    allowed = gpuscope("gate", cand, "--baseline", base, "--allow-weak", home=tmp_path)
    assert allowed.returncode == 0, allowed.stdout
    assert "PASS" in allowed.stdout and "--allow-weak" in allowed.stdout


def test_the_configs_weak_pass_is_the_same_as_allow_weak(tmp_path: Path) -> None:
    base, cand = _three_steps(tmp_path)
    config = tmp_path / "gate.toml"
    config.write_text('weak = "pass"\n')
    assert gpuscope("gate", cand, "--baseline", base, "--config", str(config), home=tmp_path).returncode == 0


def test_a_report_that_failed_its_consistency_check_fails_the_gate_closed(tmp_path: Path) -> None:
    """A saved report whose advice promises more than its stage takes (as an older version could save it): read
    back, the advice is withdrawn, the check named, and the gate fails instead of gating on it."""
    saved = gpuscope("analyze", FAST, "--json", "--no-save", home=tmp_path)
    assert saved.returncode == 0, saved.stderr
    doc = json.loads(saved.stdout)
    share = doc["stage_shares"]["host_overhead"]
    doc["recommendations"].insert(0, {"code": "cuda_graphs", "title": "Capture the step in a CUDA graph",
                                      "detail": "d", "est_step_saving": share + 0.2, "reasoning": "r",
                                      "stage": "host_overhead"})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    result = gpuscope("gate", FAST, "--baseline", str(bad), "--json", home=tmp_path)
    assert result.returncode == 1, result.stderr
    gate = json.loads(result.stdout)
    assert not gate["comparable"] and [m["code"] for m in gate["mismatches"]] == ["inconsistent_report"]
    assert "savings_vs_waste" in gate["mismatches"][0]["reason"] and gate["metrics"] == []


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


def _dlrm_rank3_cut(tmp_path: Path) -> Path:
    folder = edits.copy("dlrm_8rank", tmp_path / "candidate")
    edits.cut_short(edits.rank_file(folder, 3))
    return folder


def test_a_corrupt_candidate_rank_fails_with_the_reason_in_every_output(tmp_path: Path) -> None:
    summary, junit, bench = tmp_path / "summary.md", tmp_path / "gate.xml", tmp_path / "bench.json"
    args = ("gate", str(_dlrm_rank3_cut(tmp_path)), "--baseline", str(SAMPLES / "dlrm_8rank"))
    result = gpuscope(*args, "--junit", str(junit), "--benchmark-json", str(bench), home=tmp_path,
                      GITHUB_STEP_SUMMARY=str(summary))
    assert result.returncode == 1, result.stderr
    reason = "1 rank file of the candidate cannot be read"
    assert reason in result.stdout and "worker3_" in result.stdout and "FAIL: not comparable" in result.stdout
    assert "--allow-partial" in result.stdout
    failure = ET.parse(junit).getroot().find("testsuite/testcase[@name='comparable']/failure")
    assert failure is not None and reason in (failure.get("message") or "")
    text = summary.read_text()
    assert "### gpuscope gate: FAIL" in text and reason in text
    entries = {e.name: e for e in msgspec.json.decode(bench.read_bytes(), type=list[BenchmarkEntry])}
    assert set(entries) == {"gpuscope not comparable"}  # a job with a rank missing is not charted as this job
    assert entries["gpuscope not comparable"].value == 1 and reason in (entries["gpuscope not comparable"].extra or "")
    doc = json.loads(gpuscope(*args, "--json", home=tmp_path).stdout)
    assert doc["passed"] is False and doc["comparable"] is False and doc["metrics"] == []
    assert [(m["code"], m["side"], m["partial"]) for m in doc["mismatches"]] == [("unreadable_rank", "candidate",
                                                                                   True)]


def test_allow_partial_gates_the_ranks_both_runs_have(tmp_path: Path) -> None:
    # One profiler step a side tells no typical step from a slow one: --allow-weak lets that pass.
    result = gpuscope("gate", str(_dlrm_rank3_cut(tmp_path)), "--baseline", str(SAMPLES / "dlrm_8rank"),
                      "--allow-partial", "--allow-weak", "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["passed"] and doc["partial"] and doc["ranks"] == [0, 1, 2, 4, 5, 6, 7]
    assert {m["key"]: m for m in doc["metrics"]}["cost_per_1k_steps"]["change"] == pytest.approx(0.0)


def _missing_rank(tmp_path: Path) -> tuple[str, str]:
    folder = edits.copy("dlrm_8rank", tmp_path / "candidate")
    edits.rank_file(folder, 3).unlink()
    return str(folder), str(SAMPLES / "dlrm_8rank")


def _fewer_gpus(tmp_path: Path) -> tuple[str, str]:
    folder = edits.copy("dlrm_8rank", tmp_path / "candidate")
    edits.set_world_size(folder, 4)
    return str(folder), str(SAMPLES / "dlrm_8rank")


def _no_steady_steps(tmp_path: Path) -> tuple[str, str]:
    folder = edits.copy("resnet50_workers4", tmp_path / "baseline")
    edits.drop_profiler_steps(folder)
    return str(SAMPLES / "resnet50_dataloader_bound"), str(folder)


def _other_workload(tmp_path: Path) -> tuple[str, str]:
    return str(SAMPLES / "h200" / "transformer_bf16"), str(SAMPLES / "h200" / "decode_bs4")


def _other_schema(tmp_path: Path) -> tuple[str, str]:
    saved = gpuscope("analyze", FAST, "--no-save", "--json", home=tmp_path)
    newer = tmp_path / "newer.json"
    newer.write_text(saved.stdout.replace('"gpuscope.report/1"', '"gpuscope.report/9"', 1))
    return FAST, str(newer)


@pytest.mark.parametrize(("make", "words"), [
    (_missing_rank, "the candidate lacks rank 3: 7 of its 8 ranks read"),
    (_fewer_gpus, "the baseline is a job of 8 ranks and the candidate of 4"),
    (_no_steady_steps, "the baseline has no steady steps to compare"),
    (_other_workload, "the baseline is inference and the candidate training: another workload"),
    (_other_schema, "the baseline's report is in schema 'gpuscope.report/9'"),
])
def test_runs_of_another_job_fail_with_the_reason(tmp_path: Path, make: Callable[[Path], tuple[str, str]],
                                                  words: str) -> None:
    candidate, baseline = make(tmp_path)
    result = gpuscope("gate", candidate, "--baseline", baseline, home=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert words in " ".join(result.stdout.split()) and "FAIL: not comparable" in result.stdout


def test_a_cpu_baseline_from_the_store_is_not_compared_with_a_v100_candidate(tmp_path: Path) -> None:
    assert gpuscope("analyze", str(SAMPLES / "cpu_mlp_aa" / "run_a"), "--name", "main", home=tmp_path).returncode == 0
    result = gpuscope("gate", FAST, "--baseline-from-store", "main", "--json", home=tmp_path)
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    # a CPU job runs on no GPU: another model and another count than the candidate's one V100
    assert [m["code"] for m in doc["mismatches"]] == ["gpu_count", "gpu_model"] and doc["metrics"] == []


def test_a_saved_baseline_keeps_its_unreadable_rank_and_its_world_size(tmp_path: Path) -> None:
    saved = gpuscope("analyze", str(_dlrm_rank3_cut(tmp_path)), "--name", "main", "--json", home=tmp_path)
    assert saved.returncode == 0, saved.stderr
    run_id = json.loads(saved.stdout)["run"]["id"]
    args = ("gate", str(SAMPLES / "dlrm_8rank"), "--baseline-from-store", "main", "--json")
    first = json.loads(gpuscope(*args, home=tmp_path).stdout)
    assert [(m["code"], m["side"]) for m in first["mismatches"]] == [("unreadable_rank", "baseline")]
    # Analysed again from the store, the run no longer knows the file it could not read; its world size still tells.
    assert gpuscope("show", run_id, "--reanalyze", "--json", home=tmp_path).returncode == 0
    again = json.loads(gpuscope(*args, home=tmp_path).stdout)
    assert [(m["code"], m["side"]) for m in again["mismatches"]] == [("missing_ranks", "baseline")]
