"""One-time start-up, whatever its calls are named, is left out of the steady window, with or without profiler
steps; a trace that holds only start-up gets no verdict and no saving. Traces built by hand, figures known by
construction."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.api.analysis import trace_run_meta
from gpuscope.model.cost import Price
from gpuscope.model.report import Report
from gpuscope.model.run import Run
from gpuscope.traces import load
from tests import builders as b

S = 1_000_000.0  # µs
STEP_US = 10_000.0


def analyse(tmp_path: Path, events: list[b.Event]) -> Report:
    loaded = load(b.write(tmp_path / "t.json", b.trace(events)))
    price = Price(usd_per_gpu_hour=4.0, source="test")
    return build_report(Run(meta=trace_run_meta(loaded.traces, name="t"), traces=loaded.traces),
                        AnalysisOptions(price=price))


def context_creation() -> list[b.Event]:
    """43 s of a process that created its CUDA context (30 s inside cudaDeviceGetStreamPriorityRange, its first
    runtime call), allocated once and built its model on the CPU, running five tiny kernels."""
    events = [b.cpu_op("aten::empty", 0, 30.6 * S), b.launch(100, 30 * S, 1, name="cudaDeviceGetStreamPriorityRange"),
              b.launch(30.7 * S, 5, 2, name="cudaGetDeviceCount"),
              b.launch(30.7 * S + 10, 20_000, 3, name="cudaMalloc")]
    events += [b.cpu_op("aten::normal_", 31 * S + i * 10_000, 9_000) for i in range(1200)]
    for i in range(5):
        t = 31 * S + i * 2 * S
        events += [b.launch(t, 10, 100 + i), b.kernel("fill_kernel", t + 20, 5, 100 + i)]
    return [*events, b.cpu_op("aten::copy_", 43 * S - 1000, 900)]


def test_a_trace_of_cuda_context_creation_gives_no_verdict_and_no_saving(tmp_path: Path) -> None:
    r = analyse(tmp_path, context_creation())
    assert r.verdict.primary is None and "start-up only" in (r.verdict.summary or "")
    assert "cudaDeviceGetStreamPriorityRange" in (r.verdict.summary or "")
    assert [x.code for x in r.recommendations] == ["profiler_schedule"]
    assert all(x.est_step_saving is None and x.est_saving_usd is None for x in r.recommendations)
    assert r.cost is not None and r.cost.wasted_usd is None
    startup = r.ranks[0].startup
    assert startup is not None and not startup.steady
    assert startup.parts_us == {"CUDA/HIP initialisation": pytest.approx(30 * S + 20_000)}
    assert startup.calls == ("cudaDeviceGetStreamPriorityRange", "cudaMalloc")


def steady_loop(t0: float, steps: int, *, busy_us: float = 4_000.0, corr0: int = 1000) -> list[b.Event]:
    """Profiler steps of STEP_US, each one op launching one kernel of ``busy_us`` (correlation ids from ``corr0``)."""
    events: list[b.Event] = []
    for i in range(steps):
        t = t0 + i * STEP_US
        corr = corr0 + i
        events += [b.step(i, t, STEP_US), b.cpu_op("aten::mm", t + 100, 200), b.launch(t + 150, 20, corr),
                   b.kernel("gemm", t + 200, busy_us, corr)]
    return events


def without_steps(events: list[b.Event]) -> list[b.Event]:
    return [e for e in events if not e["name"].startswith("ProfilerStep#")]


def test_a_long_first_runtime_call_of_any_name_is_context_creation(tmp_path: Path) -> None:
    loop = without_steps(steady_loop(2.1 * S, 100))
    first = [b.cpu_op("aten::to", 0, 2 * S + 50), b.launch(10, 2 * S, 1, name="cudaStreamIsCapturing")]
    r = analyse(tmp_path, [*first, *loop])
    rank = r.ranks[0]
    assert rank.startup is not None and rank.startup.steady
    assert rank.startup.parts_us == {"CUDA/HIP initialisation": pytest.approx(2 * S)}
    window = loop[-1]["ts"] + loop[-1]["dur"]
    assert rank.window_us == pytest.approx(window)
    assert rank.steady_window_us == pytest.approx(window - 2 * S - 10)  # from the end of the call to the end
    assert r.verdict.primary is not None


def test_a_long_first_runtime_call_that_waits_on_the_gpu_is_not_start_up(tmp_path: Path) -> None:
    loop = without_steps(steady_loop(0.5 * S, 50))
    first = [b.cpu_op("aten::copy_", 0, 0.4 * S + 50), b.launch(10, 0.4 * S, 1, name="cudaMemcpyAsync")]
    r = analyse(tmp_path, [*first, *loop])
    assert r.ranks[0].startup is None


def _in_first_step(kind: str) -> tuple[list[b.Event], str, float]:
    """Events of one-time work of ``kind`` at the start of step 0, the part they are, and its length (µs)."""
    if kind == "device query":
        return [b.launch(50, 300_000, 1, name="cudaGetDeviceProperties_v2")], "CUDA/HIP initialisation", 300_000
    if kind == "hip":
        return [b.launch(50, 250_000, 1, name="hipInit")], "CUDA/HIP initialisation", 250_000
    if kind.startswith("nccl"):  # the c10d call that set the communicator up holds it: all of it is start-up,
        # but not the Python frame that holds the whole program (with_stack traces)
        main = [b.cpu_op("train.py(12): main", 0, 10 * S, cat="python_function")] if kind == "nccl in main" else []
        return ([*main, b.cpu_op("c10d::allreduce_", 50, 400_000),
                 b.cpu_op("ncclCommInitRank", 100, 350_000, cat="user_annotation")], "NCCL/RCCL communicator init",
                400_000)
    if kind == "cudnn":  # benchmark mode times algorithms with CUDA events
        events = [b.cpu_op("aten::cudnn_convolution", 50, 500_000)]
        events += [b.launch(1_000 + i * 10_000, 5, 500 + i, name="cudaEventElapsedTime") for i in range(20)]
        return events, "cuDNN/MIOpen autotuning", 500_000
    # an op called in every step whose first call takes 300 ms and the others 1 ms
    return [b.cpu_op("aten::linear", 50, 300_000)], "one-time first calls", 300_000


def first_step_holding(once: list[b.Event], once_us: float, steps: int = 9) -> list[b.Event]:
    """``steps`` profiler steps of STEP_US, the first one longer by ``once_us``: ``once`` at its start (from 50 µs),
    then its step's usual work."""
    first = once_us + STEP_US
    events = [b.step(0, 0, first), *once, *without_steps(steady_loop(once_us, 1, corr0=999))]
    events += steady_loop(first, steps - 1)
    for i, e in enumerate(x for x in events if x["name"].startswith("ProfilerStep#")):
        e["name"] = f"ProfilerStep#{i}"
    return events


@pytest.mark.parametrize("kind", ["device query", "hip", "nccl", "nccl in main", "cudnn", "first call"])
def test_one_time_work_in_the_first_step_makes_it_a_warm_up_step(tmp_path: Path, kind: str) -> None:
    once, part, once_us = _in_first_step(kind)
    events = first_step_holding(once, once_us + 100)
    if kind == "first call":
        events += [b.cpu_op("aten::linear", once_us + 100 + i * STEP_US + 400, 1_000) for i in range(1, 9)]
    rank = analyse(tmp_path, events).ranks[0]
    assert rank.startup is not None and rank.startup.steady and rank.startup.warmup_steps == 1
    assert rank.startup.parts_us == {part: pytest.approx(once_us)}
    assert [s.warmup for s in rank.per_step] == [True] + [False] * 8
    assert rank.steps == 8 and rank.step_time_us == pytest.approx(STEP_US)


@pytest.mark.parametrize("first_us,wait_us", [(300_000, 295_000), (60_000, 0)],
                         ids=["waits on the GPU", "a pause under 100 ms"])
def test_a_slow_first_call_that_waits_or_pauses_is_not_start_up(tmp_path: Path, first_us: float,
                                                                 wait_us: float) -> None:
    once = [b.cpu_op("aten::item", 50, first_us)]
    if wait_us:
        once.append(b.launch(60, wait_us, 99, name="cudaStreamSynchronize"))
    events = first_step_holding(once, first_us + 100)
    events += [b.cpu_op("aten::item", first_us + 100 + i * STEP_US + 500, 100) for i in range(1, 9)]
    rank = analyse(tmp_path, events).ranks[0]
    assert rank.startup is None and rank.steps == 9


def test_a_trace_mostly_start_up_with_steady_gpu_work_after_it_is_judged_on_that_work(tmp_path: Path) -> None:
    loop = without_steps(steady_loop(3.1 * S, 200))  # 2 s at 40% busy after 3 s of context creation
    r = analyse(tmp_path, [b.cpu_op("aten::empty", 0, 3 * S + 50), b.launch(10, 3 * S, 1, name="cudaFree"), *loop])
    rank = r.ranks[0]
    assert rank.startup is not None and rank.startup.steady
    assert rank.steady_window_us == pytest.approx(loop[-1]["ts"] + loop[-1]["dur"] - 3 * S - 10)
    assert r.verdict.primary is not None and rank.gpu_busy == pytest.approx(200 * 4_000 / rank.steady_window_us)
