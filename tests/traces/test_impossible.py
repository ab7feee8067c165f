"""GPU events that cannot have happened are dropped as the trace is read, each named in a warning; events that can
have happened, however long, are kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuscope.model.trace import GPU_KINDS, RankTrace
from gpuscope.traces import load, read_trace
from tests import builders as b
from tests.conftest import SAMPLES

DAY_US = 86_400e6
STEP_US = 100_000.0


def steps_with_kernels(steps: int = 10, *, kernel_us: float = 40_000.0) -> list[b.Event]:
    """One second of 100 ms steps; in each, a launch and one kernel on stream 7."""
    events: list[b.Event] = []
    for i in range(steps):
        t0 = i * STEP_US
        events += [b.step(i, t0, STEP_US), b.cpu_op("aten::mm", t0 + 10, 60),
                   b.launch(t0 + 20, 10, 10 + i), b.kernel("gemm", t0 + 40, kernel_us, 10 + i)]
    return events


def read(tmp_path: Path, events: list[b.Event], name: str = "t.json") -> RankTrace:
    return read_trace(b.write(tmp_path / name, b.trace(events)))


def gpu_names(trace: RankTrace) -> list[str]:
    ev = trace.events
    return [trace.names[i] for i in ev.name_id[ev.mask(*GPU_KINDS)].tolist()]


def test_a_six_day_kernel_in_a_one_second_trace_is_dropped_and_named(tmp_path: Path, chunked: bool) -> None:
    clean = read(tmp_path, steps_with_kernels(), "clean.json")
    events = steps_with_kernels()
    events.insert(13, b.kernel("corrupt_gemm", 3 * STEP_US + 50, 6 * DAY_US, 13))
    trace = read(tmp_path, events)
    (dropped,) = trace.dropped
    assert (dropped.name, dropped.kind, dropped.duration_ns) == ("corrupt_gemm", "kernel", int(6 * DAY_US * 1000))
    assert (dropped.device, dropped.stream) == (0, 7) and "past the host's last recorded call" in dropped.why
    for column in ("ts_ns", "dur_ns", "kind", "stream", "correlation"):
        assert np.array_equal(getattr(trace.events, column), getattr(clean.events, column))
    assert [trace.names[i] for i in trace.events.name_id] == [clean.names[i] for i in clean.events.name_id]


def test_the_warning_names_the_event_its_length_and_the_rank_it_is_analysed_as(tmp_path: Path) -> None:
    events = steps_with_kernels()
    events.append(b.kernel("corrupt_gemm", 50, 6 * DAY_US, 99))
    path = b.write(tmp_path / "rank3.json", b.trace(events))
    (line,) = load(path).warnings
    assert line.startswith(f"rank 3 ({path}): dropped 1 impossible GPU event")
    assert 'kernel "corrupt_gemm" of 6.0 days on GPU 0 stream 7' in line


def test_a_kernel_overlapping_the_next_on_its_stream_by_more_than_a_step_is_dropped(tmp_path: Path) -> None:
    # 3 s in a 10 s trace: inside the host's record, yet the stream's next kernel starts 2.9 s before it would end
    events = steps_with_kernels(100)
    events.append(b.kernel("stuck_gemm", 5 * STEP_US + 50_000, 3e6, 999))
    trace = read(tmp_path, events)
    (dropped,) = trace.dropped
    assert dropped.name == "stuck_gemm" and "more than a profiler step (100 ms)" in dropped.why
    assert gpu_names(trace) == ["gemm"] * 100


def test_a_kernel_far_longer_than_its_neighbours_that_holds_the_next_is_dropped_without_steps(tmp_path: Path) -> None:
    events = [b.cpu_op("aten::add", 0, 10e6)]  # a 10 s host record, no profiler steps
    for i in range(50):
        events += [b.launch(i * 1000, 5, i + 1), b.kernel("add", i * 1000 + 10, 10, i + 1)]
    events.append(b.kernel("corrupt_add", 20_500, 2e6, 500))  # 2 s among 10 µs kernels, the next inside it
    trace = read(tmp_path, events)
    (dropped,) = trace.dropped
    assert dropped.name == "corrupt_add" and "200,000x longer than the work around it" in dropped.why


@pytest.mark.parametrize("case", ["graph", "programmatic", "own stream"])
def test_work_that_can_have_run_so_is_kept(tmp_path: Path, case: str) -> None:
    events = steps_with_kernels()
    if case == "graph":  # a graph's branches run side by side on the stream it was launched on
        events += [b.launch(200, 10, 500, name="cudaGraphLaunch"), b.kernel("allreduce", 300, 80_000, 500, stream=9),
                   b.kernel("add", 400, 10, 500, stream=9), b.kernel("add", 500, 10, 500, stream=9)]
    elif case == "programmatic":  # a dependent launch starts before its primary ends, and ends after it
        events += [b.launch(200, 10, 500), b.kernel("gemm_pdl", 300, 50_000, 500, stream=9),
                   b.launch(210, 10, 501), b.kernel("epilogue", 50_200, 5_000, 501, stream=9)]
    else:  # long, but inside the host's record and alone on its stream
        events += [b.launch(200, 10, 500), b.kernel("ncclDevKernel_AllReduce", 300, 900_000, 500, stream=13)]
    trace = read(tmp_path, events)
    assert trace.dropped == () and load(tmp_path / "t.json").warnings == ()


def test_nothing_of_the_bundled_real_traces_is_dropped() -> None:
    files = sorted(p for p in SAMPLES.rglob("*.json.gz") if "expected" not in p.parts)
    assert len(files) > 20
    assert {str(f): read_trace(f).dropped for f in files} == {str(f): () for f in files}


def test_in_a_gpu_only_trace_the_stream_rules_still_hold(tmp_path: Path) -> None:
    events = [b.kernel("add", i * 1000, 10, i + 1) for i in range(50)]
    events += [b.kernel("corrupt_add", 20_500, 6 * DAY_US, 500), b.kernel("last", 60_000, 6 * DAY_US, 501)]
    trace = read(tmp_path, events)
    # the one that holds the next kernel on its stream goes; the last one has no host record to be judged by
    assert [d.name for d in trace.dropped] == ["corrupt_add"]
