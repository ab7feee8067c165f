"""Step traces for Perfetto: the slowest and the median step picked by hand count, each written as valid
Chrome-trace JSON holding exactly the events of its window, and read back by gpuscope's own reader."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.analyzers.trace.step_pick import StepWindow, slowest_and_median
from gpuscope.analyzers.trace.steps import find_steps
from gpuscope.model.trace import RankTrace
from gpuscope.reports.timeline import file_name, report_step_files, step_trace, step_trace_bytes
from gpuscope.traces import load, read_trace
from tests import builders as b
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

# Four steps: host spans of 100 µs each, a kernel each; step 2's kernel runs 250 µs past its host span.
KERNEL_US = {0: 30, 1: 80, 2: 300, 3: 60}


def four_steps() -> list[b.Event]:
    events: list[b.Event] = []
    for i, kernel_us in KERNEL_US.items():
        t0 = 1000 + i * 1000
        events += [b.step(i, t0, 100), b.cpu_op("aten::mm", t0 + 10, 40), b.launch(t0 + 20, 5, 50 + i),
                   b.kernel("gemm", t0 + 50, kernel_us, 50 + i)]
    events.append(b.cpu_op("aten::zeros", 3200, 30, tid=2))  # another thread, inside step 2's stretched span
    return events


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> RankTrace:
    return read_trace(b.write(tmp_path_factory.mktemp("tl") / "t.json", b.trace(four_steps())))


def test_slowest_and_median_by_hand(trace: RankTrace) -> None:
    # Step lengths: host end or kernel end, whichever later: 100, 130, 350, 110 µs. Lower median of four: 110.
    picked = slowest_and_median(trace)
    assert [(w.name, w.why, w.duration_us) for w in picked] == [("2", ("slowest",), 350.0),
                                                                ("3", ("median",), 110.0)]


def test_one_step_is_both(tmp_path: Path) -> None:
    events = four_steps()[:4]
    (only,) = slowest_and_median(read_trace(b.write(tmp_path / "t.json", b.trace(events))))
    assert only.why == ("slowest", "median") and only.name == "0"


def test_no_profiler_steps_no_window(tmp_path: Path) -> None:
    path = b.write(tmp_path / "t.json", b.trace([b.cpu_op("aten::mm", 0, 10)]))
    assert slowest_and_median(read_trace(path)) == ()


def overlapping(events: list[b.Event], start_us: float, end_us: float, step_name: str) -> list[b.Event]:
    """A reference from the events as built: the complete events that overlap the window, less other steps."""
    return [e for e in events if e["ph"] == "X" and e["ts"] < end_us and e["ts"] + e["dur"] > start_us
            and not (e["name"].startswith("ProfilerStep#") and e["name"] != f"ProfilerStep#{step_name}")]


def test_the_file_holds_exactly_the_steps_window(trace: RankTrace, tmp_path: Path) -> None:
    slowest = slowest_and_median(trace)[0]
    doc = json.loads(step_trace_bytes(trace, slowest))
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    want = overlapping(four_steps(), 3000, 3350, "2")
    assert sorted((e["name"], e["ts"], e["dur"]) for e in complete) == sorted(
        (e["name"], e["ts"], e["dur"]) for e in want)
    assert {e["name"] for e in complete} == {"ProfilerStep#2", "aten::mm", "cudaLaunchKernel", "gemm", "aten::zeros"}
    path = tmp_path / "step.json"
    path.write_bytes(step_trace_bytes(trace, slowest))
    back = read_trace(path)
    steps = find_steps(back)
    assert steps.names == ("2",) and (int(steps.starts_ns[0]), int(steps.ends_ns[0])) == (
        slowest.start_ns, slowest.end_ns)
    assert len(back.events) == len(complete)
    assert doc["gpuscope"]["window_start_us"] == 3000 and doc["gpuscope"]["window_end_us"] == 3350


def test_metadata_names_every_process_and_thread(trace: RankTrace) -> None:
    doc = step_trace(trace, slowest_and_median(trace)[0])
    events = doc["traceEvents"]
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    named_threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    named_processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert named_threads == used
    assert named_processes == {100: "rank 0 host (pid 100)", 0: "GPU 0"}
    assert all(isinstance(e["ts"], int | float) and isinstance(e["dur"], int | float) and e["dur"] >= 0
               for e in events if e["ph"] == "X")


def test_compressed_file_is_the_same_document(trace: RankTrace) -> None:
    window = slowest_and_median(trace)[0]
    assert gzip.decompress(step_trace_bytes(trace, window, compress=True)) == step_trace_bytes(trace, window)
    assert file_name("../my run", window, compress=True) == "___my_run.rank0.step2.slowest.json.gz"


def test_resnet_sample_picks_agree_with_the_reports_steps(tmp_path: Path) -> None:
    trace = read_trace(next((SAMPLES / "resnet50_dataloader_bound").glob("*.json.gz")))
    steady = [s for s in analyze_rank(trace).per_step if not s.warmup]
    durations = sorted(s.duration_us for s in steady)
    slowest, median = slowest_and_median(trace)
    assert slowest.duration_us == max(durations) and median.duration_us == durations[(len(durations) - 1) // 2]
    path = tmp_path / "s.json.gz"
    path.write_bytes(step_trace_bytes(trace, slowest, compress=True))
    back = read_trace(path)
    inside = (trace.events.ts_ns < slowest.end_ns) & (trace.events.end_ns > slowest.start_ns)
    assert len(back.events) <= int(inside.sum()) and np.all(back.events.ts_ns < slowest.end_ns)
    assert back.gpus[0].name == "Tesla V100-DGXS-32GB"


def plugin_picks(line: int) -> list[tuple[str, str]]:
    """The slowest and the (lower) median step from the TensorBoard plugin's own step table of the sample
    (sample_traces/expected, the overview on ``line``): each step's parts add up to its duration."""
    overview = json.loads((SAMPLES / "expected" / "tb_plugin_result_check_file.txt").read_text().splitlines()[line])
    names = [c.get("name") for c in overview["steps"]["columns"]]
    parts = [i for i, n in enumerate(names) if n in ("Kernel", "Memcpy", "Memset", "Runtime", "DataLoader",
                                                       "CPU Exec", "Other")]
    length = {row[0]: sum(row[i] for i in parts) for row in overview["steps"]["rows"]}
    by_length = sorted(length, key=lambda n: length[n])
    return [(max(length, key=lambda n: length[n]), "slowest"), (by_length[(len(by_length) - 1) // 2], "median")]


def test_a_report_offers_the_rank_with_the_jobs_slowest_step() -> None:
    traces = load(SAMPLES / "dlrm_8rank").traces
    longest = {t.rank: max(s.duration_us for s in analyze_rank(t).per_step if not s.warmup) for t in traces}
    files = report_step_files(traces, "run")
    assert {f.step.rank for f in files} == {max(longest, key=lambda r: longest[r])}
    assert files[0].step.duration_us == max(longest.values())
    assert json.loads(gzip.decompress(files[0].data))["gpuscope"]["rank"] == files[0].step.rank


def files_written(stdout: str) -> list[Path]:
    return [Path(line) for line in stdout.splitlines() if line.strip()]


def test_timeline_command_writes_and_prints_the_paths(tmp_path: Path) -> None:
    result = gpuscope("timeline", str(SAMPLES / "dlrm_8rank"), "--rank", "3", "-o", str(tmp_path / "out"),
                      home=tmp_path)
    assert result.returncode == 0, result.stderr
    (path,) = files_written(result.stdout)
    assert path.name == "dlrm_8rank.rank3.step10.slowest-median.json" and "ui.perfetto.dev" in result.stderr
    doc: dict[str, Any] = json.loads(path.read_text())
    assert doc["gpuscope"]["rank"] == 3 and read_trace(path).rank == 3
    result = gpuscope("timeline", str(SAMPLES / "resnet50_workers4"), "--gzip", "-o", str(tmp_path), home=tmp_path)
    assert [p.name.split(".")[2:4] for p in files_written(result.stdout)] == [
        [f"step{name}", why] for name, why in plugin_picks(5)]
    assert all(json.loads(gzip.decompress(p.read_bytes()))["traceEvents"] for p in files_written(result.stdout))


def test_timeline_without_steps_says_so(tmp_path: Path) -> None:
    result = gpuscope("timeline", str(SAMPLES / "torch_compile_cpu"), "-o", str(tmp_path), home=tmp_path)
    assert result.returncode == 2 and "no steps to write: no ProfilerStep" in one_clean_error_line(result)


def test_step_window_is_a_plain_record() -> None:
    w = StepWindow(rank=1, name="7", start_ns=1000, end_ns=3500, why=("median",))
    assert w.duration_us == 2.5
