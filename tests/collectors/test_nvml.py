"""NvmlSampler against NVML mocked at the binding, across GPU set-ups."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console

from gpuscope.analyzers.report import build_report
from gpuscope.collectors.base import Sampler
from gpuscope.collectors.nvml import MAX_FAILED_READS, NO_DRIVER, NvmlSampler, NvmlUnavailable
from gpuscope.collectors.nvml_calls import DEVICE_CALLS
from gpuscope.collectors.sampler import SamplingLoop
from gpuscope.model import schema as S
from gpuscope.model.live import CounterStop
from gpuscope.model.run import RunMeta
from gpuscope.model.schema import SampleRow
from gpuscope.reports.terminal import render
from gpuscope.store import Store
from tests.collectors.nvml_fake import FUNCTIONS, FakeGpu, FakeNvml, pynvml
from tests.fakes import FakeClock

T0 = 1_800_000_000_000_000_000
SECOND = 1_000_000_000
TARGET = 4242
OTHER = 777


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., FakeNvml]]:
    """Build the machine: ``fake_nvml(FakeGpu(...), FakeGpu(...))``."""
    def build(*gpus: FakeGpu) -> FakeNvml:
        return FakeNvml(list(gpus), monkeypatch)
    yield build


def by_metric(rows: list[SampleRow], gpu: int = 0, pid: int = S.NO_PID) -> dict[str, float]:
    out: dict[str, float] = {}
    for _ts, source, g, p, metric, value in rows:
        assert source == S.NVML
        if g == gpu and p == pid:
            assert metric not in out, f"{metric} twice in one tick"
            out[metric] = value
    return out


def ticks(sampler: NvmlSampler, n: int) -> list[list[SampleRow]]:
    return [sampler.sample(T0 + i * SECOND) for i in range(n)]


def test_h100_everything_supported(fake_nvml: Callable[..., FakeNvml]) -> None:
    gpu = FakeGpu(processes=[(TARGET, 12 * 2**30), (OTHER, 3 * 2**30)], proc_sm_pct={TARGET: [80, 90], OTHER: [50]})
    fake_nvml(gpu)
    sampler = NvmlSampler.open(pids=lambda: {TARGET, TARGET + 1})
    assert isinstance(sampler, Sampler) and sampler.name == S.NVML
    info = sampler.gpus()
    assert len(info) == 1
    assert (info[0].index, info[0].name, info[0].uuid) == (0, "NVIDIA H100 80GB HBM3", gpu.uuid)
    assert (info[0].memory_bytes, info[0].power_limit_w, info[0].compute_capability) == (80 * 2**30, 700.0, "9.0")

    first, second = ticks(sampler, 2)
    device = by_metric(first)
    assert device == {
        S.GPU_UTIL: 0.87, S.GPU_MEM_UTIL: 0.41,
        S.GPU_MEMORY_USED_BYTES: 30 * 2**30, S.GPU_MEMORY_TOTAL_BYTES: 80 * 2**30,
        S.GPU_POWER_W: 512.25, S.GPU_POWER_LIMIT_W: 700.0, S.GPU_ENERGY_J: 123_456.789,
        S.GPU_SM_CLOCK_MHZ: 1980, S.GPU_MEM_CLOCK_MHZ: 2619, S.GPU_TEMPERATURE_C: 64, S.GPU_THROTTLE_REASONS: 0x4,
        S.GPU_PCIE_TX_BYTES_PER_S: 1000 * 1024, S.GPU_PCIE_RX_BYTES_PER_S: 250_000 * 1024,
        S.GPU_OTHER_PROCESSES: 1, S.GPU_OTHERS_SM_UTIL: 0.5,  # pid 777 beside the target, at 50% SM
    }, "NVLink needs two readings, so the first tick has none"
    assert all(ts == T0 for ts, *_ in first)
    nvlink = by_metric(second)
    assert nvlink[S.GPU_NVLINK_TX_BYTES_PER_S] == 2_000_000 * 1024
    assert nvlink[S.GPU_NVLINK_RX_BYTES_PER_S] == 1_000_000 * 1024

    assert by_metric(first, pid=TARGET) == {S.PROC_GPU_MEMORY_BYTES: 12 * 2**30,
                                            S.PROC_GPU_SM_UTIL: pytest.approx(0.85), S.PROC_GPU_MEM_UTIL: 0.0}
    assert by_metric(first, pid=OTHER) == {}, "only the target's process tree is reported"
    assert sampler.target_gpus() == {0}
    assert sampler.unsupported == frozenset() and sampler.errors == 0
    sampler.close()
    assert pynvml.nvmlShutdown.call_count == 1


def test_unsupported_calls_are_asked_once_and_never_recorded(fake_nvml: Callable[..., FakeNvml]) -> None:
    not_supported = pynvml.NVMLError_NotSupported
    gpu = FakeGpu(name="Tesla T4", capability=(7, 5), nvlink_links=0, fail={
        "nvmlDeviceGetPowerUsage": not_supported,
        "nvmlDeviceGetTotalEnergyConsumption": not_supported,
        "nvmlDeviceGetPcieThroughput": not_supported,
    })
    fake = fake_nvml(gpu)
    sampler = NvmlSampler.open()
    rows = [row for tick in ticks(sampler, 5) for row in tick]

    assert fake.calls("nvmlDeviceGetPowerUsage") == 1
    assert fake.calls("nvmlDeviceGetTotalEnergyConsumption") == 1
    assert fake.calls("nvmlDeviceGetPcieThroughput") == 2  # TX and RX are separate calls, each marked once
    assert fake.calls("nvmlDeviceGetFieldValues") == 0, "no active NVLink: never asked"
    assert fake.calls("nvmlDeviceGetUtilizationRates") == 5
    metrics = {row[4] for row in rows}
    for absent in (S.GPU_POWER_W, S.GPU_ENERGY_J, S.GPU_PCIE_TX_BYTES_PER_S, S.GPU_PCIE_RX_BYTES_PER_S,
                   S.GPU_NVLINK_TX_BYTES_PER_S, S.GPU_NVLINK_RX_BYTES_PER_S):
        assert absent not in metrics
    assert {S.GPU_UTIL, S.GPU_POWER_LIMIT_W, S.GPU_TEMPERATURE_C} <= metrics
    assert sampler.unsupported == {(0, "power"), (0, "energy"), (0, "pcie_tx"), (0, "pcie_rx"), (0, "nvlink")}
    assert sampler.errors == 0


def test_mig_mode_gpu_without_utilization(fake_nvml: Callable[..., FakeNvml]) -> None:
    """In MIG mode NVML has no device or per-process utilization; memory and the rest still come."""
    not_supported = pynvml.NVMLError_NotSupported
    gpu = FakeGpu(name="NVIDIA A100-SXM4-80GB", capability=(8, 0), processes=[(TARGET, 5 * 2**30)],
                  proc_sm_pct={TARGET: [70]}, fail={"nvmlDeviceGetUtilizationRates": not_supported,
                                                    "nvmlDeviceGetProcessUtilization": not_supported})
    fake = fake_nvml(gpu)
    sampler = NvmlSampler.open(pids=lambda: {TARGET})
    recorded = ticks(sampler, 3)
    rows = [row for tick in recorded for row in tick]

    metrics = {row[4] for row in rows}
    assert S.GPU_UTIL not in metrics and S.GPU_MEM_UTIL not in metrics and S.PROC_GPU_SM_UTIL not in metrics
    assert by_metric(recorded[-1], pid=TARGET) == {S.PROC_GPU_MEMORY_BYTES: 5 * 2**30}
    assert S.GPU_MEMORY_USED_BYTES in metrics
    assert fake.calls("nvmlDeviceGetUtilizationRates") == 1
    assert fake.calls("nvmlDeviceGetProcessUtilization") == 1


def test_two_gpus_target_on_one(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake = fake_nvml(FakeGpu(uuid="GPU-a", processes=[(OTHER, 2**30)], proc_sm_pct={OTHER: [99]}),
                     FakeGpu(uuid="GPU-b", processes=[(TARGET, 2**31), (TARGET + 1, None)],
                             proc_sm_pct={TARGET: [40]}))
    sampler = NvmlSampler.open(pids=lambda: {TARGET, TARGET + 1})
    rows = sampler.sample(T0)

    assert [g.uuid for g in sampler.gpus()] == ["GPU-a", "GPU-b"]
    per_process = [(g, p, m) for _, _, g, p, m, _ in rows if p != S.NO_PID]
    # TARGET + 1 holds a context (memory unknown) but has no sample in an answer that has one: under 1%, so 0.
    assert sorted(per_process) == [(1, TARGET, S.PROC_GPU_MEM_UTIL), (1, TARGET, S.PROC_GPU_MEMORY_BYTES),
                                   (1, TARGET, S.PROC_GPU_SM_UTIL), (1, TARGET + 1, S.PROC_GPU_MEM_UTIL),
                                   (1, TARGET + 1, S.PROC_GPU_SM_UTIL)]
    assert by_metric(rows, gpu=1, pid=TARGET + 1) == {S.PROC_GPU_SM_UTIL: 0.0, S.PROC_GPU_MEM_UTIL: 0.0}
    assert sampler.target_gpus() == {1}, "a worker with a context but unknown memory still puts GPU 1 in"
    assert fake.calls("nvmlDeviceGetProcessUtilization", gpu=0) == 0, "the target has no context on GPU 0"
    assert by_metric(rows, gpu=0)[S.GPU_UTIL] == 0.87 and by_metric(rows, gpu=1)[S.GPU_UTIL] == 0.87


def test_process_utilization_not_found_is_no_sample_and_is_asked_again(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake = fake_nvml(FakeGpu(processes=[(TARGET, 2**30)]))
    sampler = NvmlSampler.open(pids=lambda: {TARGET})
    rows = [row for tick in ticks(sampler, 3) for row in tick]
    assert S.PROC_GPU_SM_UTIL not in {row[4] for row in rows}
    assert fake.calls("nvmlDeviceGetProcessUtilization") == 3
    stamps = [c.args[1] for c in fake.mocks["nvmlDeviceGetProcessUtilization"].call_args_list]
    assert stamps == [T0 // 1000 - 1_000_000, T0 // 1000, (T0 + SECOND) // 1000], "each query asks since the last tick"
    assert sampler.unsupported == frozenset() and sampler.errors == 0


@pytest.mark.parametrize("error", ["NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"])
def test_no_driver_is_one_line(fake_nvml: Callable[..., FakeNvml], error: str) -> None:
    fake = fake_nvml(FakeGpu())
    fake.init_error = getattr(pynvml, error)
    with pytest.raises(NvmlUnavailable) as caught:
        NvmlSampler.open()
    assert str(caught.value) == NO_DRIVER == "no NVIDIA driver found: collecting host and stack samples only"


def test_no_permission_and_no_binding_are_one_line(fake_nvml: Callable[..., FakeNvml],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_nvml(FakeGpu())
    fake.init_error = pynvml.NVMLError_NoPermission
    with pytest.raises(NvmlUnavailable, match="^no permission .*collecting host and stack samples only$"):
        NvmlSampler.open()
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as when nvidia-ml-py is not installed
    with pytest.raises(NvmlUnavailable, match=r"^nvidia-ml-py is not installed \(pip install nvidia-ml-py\)"):
        NvmlSampler.open()


def test_driver_without_gpus(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake_nvml()
    with pytest.raises(NvmlUnavailable, match="^no NVIDIA GPU found"):
        NvmlSampler.open()
    assert pynvml.nvmlShutdown.call_count == 1


def stop_rows(rows: list[SampleRow]) -> list[tuple[int, int, str, float]]:
    return [(ts, gpu, metric, value) for ts, _src, gpu, _pid, metric, value in rows
            if metric.startswith(S.STOPPED_PREFIX)]


def test_a_lost_gpu_stops_at_that_tick_and_is_never_asked_again(fake_nvml: Callable[..., FakeNvml]) -> None:
    lost, healthy = FakeGpu(uuid="GPU-lost"), FakeGpu(uuid="GPU-ok")
    fake = fake_nvml(lost, healthy)
    sampler = NvmlSampler.open()
    before = sampler.sample(T0)
    lost.fail = {name: pynvml.NVMLError_GpuIsLost for name in fake.mocks if name.startswith("nvmlDevice")}
    during = sampler.sample(T0 + SECOND)
    calls = sum(fake.calls(name, gpu=0) for name in fake.mocks)
    lost.fail = {}  # even if it answered again: a GPU that fell off the bus needs a reset, its numbers are suspect
    after = ticks(sampler, 3)

    assert {row[2] for row in before} == {0, 1}
    assert stop_rows(during) == [(T0 + SECOND, 0, "stopped.gpu", S.STOP_GPU_LOST)]
    assert {row[2] for row in during if not row[4].startswith(S.STOPPED_PREFIX)} == {1}
    assert all({row[2] for row in tick} == {1} for tick in after) and not any(stop_rows(t) for t in after)
    assert sum(fake.calls(name, gpu=0) for name in fake.mocks) == calls, "no call reaches a lost GPU"
    assert sampler.stopped == {(0, "gpu")} and sampler.last_error == "GPU 0: utilization: GPU is lost"


def test_not_supported_mid_run_stops_that_counter_from_then_on(fake_nvml: Callable[..., FakeNvml]) -> None:
    gpu = FakeGpu()
    fake = fake_nvml(gpu)
    sampler = NvmlSampler.open()
    first = sampler.sample(T0)
    gpu.fail = {"nvmlDeviceGetPowerUsage": pynvml.NVMLError_NotSupported}
    second = sampler.sample(T0 + SECOND)
    gpu.fail = {}
    rest = ticks(sampler, 3)
    assert by_metric(first)[S.GPU_POWER_W] == 512.25
    assert stop_rows(second) == [(T0 + SECOND, 0, "stopped.power", S.STOP_NOT_SUPPORTED)]
    assert all(S.GPU_POWER_W not in by_metric(t) and S.GPU_UTIL in by_metric(t) for t in (second, *rest))
    assert fake.calls("nvmlDeviceGetPowerUsage") == 2 and (0, "power") in sampler.unsupported


def test_a_counter_never_supported_is_not_a_stop(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake_nvml(FakeGpu(fail={"nvmlDeviceGetPowerUsage": pynvml.NVMLError_NotSupported}))
    sampler = NvmlSampler.open()
    assert not any(stop_rows(t) for t in ticks(sampler, 3)) and sampler.stopped == frozenset()


@pytest.mark.parametrize("error", ["NVMLError_Unknown", "NVMLError_Timeout"])
def test_unknown_and_timeout_are_gaps_retried_up_to_a_bound(fake_nvml: Callable[..., FakeNvml], error: str) -> None:
    gpu = FakeGpu()
    fake = fake_nvml(gpu)
    sampler = NvmlSampler.open()
    gpu.fail = {"nvmlDeviceGetTemperature": getattr(pynvml, error)}
    gap = ticks(sampler, MAX_FAILED_READS - 1)  # one short of the bound: a gap, asked every tick
    gpu.fail = {}
    back = sampler.sample(T0 + 10 * SECOND)
    assert all(S.GPU_TEMPERATURE_C not in by_metric(t) and not stop_rows(t) for t in gap)
    assert by_metric(back)[S.GPU_TEMPERATURE_C] == 64 and sampler.stopped == frozenset()

    gpu.fail = {"nvmlDeviceGetTemperature": getattr(pynvml, error)}
    failing = [sampler.sample(T0 + (20 + i) * SECOND) for i in range(MAX_FAILED_READS + 3)]
    stops = [row for t in failing for row in stop_rows(t)]
    assert stops == [(T0 + (20 + MAX_FAILED_READS - 1) * SECOND, 0, "stopped.temperature", S.STOP_FAILING)]
    assert fake.calls("nvmlDeviceGetTemperature") == (MAX_FAILED_READS - 1) + 1 + MAX_FAILED_READS
    assert all(S.GPU_UTIL in by_metric(t) for t in failing), "the other counters go on"


def test_the_report_says_which_counter_stopped_and_when(fake_nvml: Callable[..., FakeNvml], tmp_path: Path) -> None:
    """Through the sampling loop and the store into the report, its warnings and the terminal view."""
    gpu, lost = FakeGpu(), FakeGpu(uuid="GPU-lost")
    fake_nvml(gpu, lost)
    sampler = NvmlSampler.open()
    clock = FakeClock(T0)

    class Breaker:
        """Breaks the fake GPUs at set ticks, as a driver would mid-run."""
        name = "breaker"

        def sample(self, now_ns: int) -> list[SampleRow]:
            if now_ns == T0 + 2 * SECOND:
                gpu.fail = {"nvmlDeviceGetPowerUsage": pynvml.NVMLError_NotSupported}
            if now_ns == T0 + 3 * SECOND:
                lost.fail = {name: pynvml.NVMLError_GpuIsLost for name in FUNCTIONS if name.startswith("nvmlDevice")}
            return []

        def close(self) -> None:
            pass

    with Store(tmp_path) as store:
        store.create_run(RunMeta(id="live", name="nvml", kind="attach", status="running", started_ns=T0))
        result = SamplingLoop(store, "live", [Breaker(), sampler], interval_s=1.0, duration_s=5.0, clock=clock).run()
        run = store.load_run("live")
    assert result.status == "complete"
    report = build_report(run)
    assert report.live is not None
    (g0, g1) = report.live.gpus
    assert g0.stopped == (CounterStop(counter="power", reason="not_supported", at_ns=T0 + 2 * SECOND, after_s=2.0),)
    assert g1.stopped == (CounterStop(counter="gpu", reason="gpu_lost", at_ns=T0 + 3 * SECOND, after_s=3.0),)
    assert report.warnings == (
        "GPU 0: `power` stopped 2.0 s into the run: the driver no longer supports it; unknown from then on",
        "GPU 1: every counter stopped 3.0 s into the run: the GPU was lost (off the bus); unknown from then on")
    assert g1.power_mean_w == 512.25, "the samples before the loss count; none after (none is 0)"
    console = Console(file=io.StringIO(), width=200)
    render(report, console)
    assert "GPU 1: every counter stopped 3.0 s into the run" in console.file.getvalue()  # type: ignore[attr-defined]


def test_one_failing_call_for_one_tick(fake_nvml: Callable[..., FakeNvml]) -> None:
    gpu = FakeGpu(fail={"nvmlDeviceGetTemperature": pynvml.NVMLError_Unknown})
    fake_nvml(gpu)
    sampler = NvmlSampler.open()
    first = by_metric(sampler.sample(T0))
    gpu.fail = {}
    second = by_metric(sampler.sample(T0 + SECOND))
    assert S.GPU_TEMPERATURE_C not in first and S.GPU_UTIL in first
    assert second[S.GPU_TEMPERATURE_C] == 64
    assert sampler.errors == 1 and sampler.last_error is not None and "temperature" in sampler.last_error


def test_throttle_reasons_fall_back_to_the_older_spelling(fake_nvml: Callable[..., FakeNvml],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver before r535 lacks the "clocks event" symbol; an older binding lacks the function."""
    gpu = FakeGpu(reasons=0x40, fail={"nvmlDeviceGetCurrentClocksEventReasons": pynvml.NVMLError_FunctionNotFound})
    fake = fake_nvml(gpu)
    sampler = NvmlSampler.open()
    assert by_metric(sampler.sample(T0))[S.GPU_THROTTLE_REASONS] == 0x40
    assert by_metric(sampler.sample(T0 + SECOND // 2))[S.GPU_THROTTLE_REASONS] == 0x40
    assert fake.calls("nvmlDeviceGetCurrentClocksEventReasons") == 1, "a symbol the driver lacks is not asked again"
    assert fake.calls("nvmlDeviceGetCurrentClocksThrottleReasons") == 2
    assert sampler.unsupported == frozenset()

    monkeypatch.delattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons")
    gpu.fail = {}
    older_binding = NvmlSampler.open()
    assert by_metric(older_binding.sample(T0))[S.GPU_THROTTLE_REASONS] == 0x40
    assert fake.calls("nvmlDeviceGetCurrentClocksThrottleReasons") == 3

    monkeypatch.delattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons")
    neither = NvmlSampler.open()
    assert S.GPU_THROTTLE_REASONS not in by_metric(neither.sample(T0))
    assert neither.unsupported == {(0, "throttle_reasons")}


def test_a_driver_older_than_the_binding_lists_processes_with_v2(fake_nvml: Callable[..., FakeNvml]) -> None:
    """The binding's unversioned call needs the driver's _v3 symbol and raises NVMLLibraryMismatchError without it."""
    gpu = FakeGpu(processes=[(TARGET, 2**30)],
                  fail={"nvmlDeviceGetComputeRunningProcesses": pynvml.NVMLLibraryMismatchError})
    fake = fake_nvml(gpu)
    sampler = NvmlSampler.open(pids=lambda: {TARGET})
    for tick in ticks(sampler, 3):
        assert by_metric(tick, pid=TARGET)[S.PROC_GPU_MEMORY_BYTES] == 2**30
    assert fake.calls("nvmlDeviceGetComputeRunningProcesses") == 1
    assert fake.calls("nvmlDeviceGetComputeRunningProcesses_v2") == 3
    assert sampler.target_gpus() == {0} and sampler.errors == 0


def test_nvlink_reported_not_supported_per_field(fake_nvml: Callable[..., FakeNvml],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """NVLink state says active, but the throughput fields answer NOT_SUPPORTED: marked once, never 0."""
    gpu = FakeGpu(nvlink_links=4)
    fake = fake_nvml(gpu)
    sampler = NvmlSampler.open()
    gpu.nvlink_links = 0
    rows = [row for tick in ticks(sampler, 3) for row in tick]
    assert not {S.GPU_NVLINK_TX_BYTES_PER_S, S.GPU_NVLINK_RX_BYTES_PER_S} & {row[4] for row in rows}
    assert fake.calls("nvmlDeviceGetFieldValues") == 1
    assert (0, "nvlink") in sampler.unsupported


def test_a_gpu_that_will_not_open_is_left_out(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake = fake_nvml(FakeGpu(uuid="GPU-mine"), FakeGpu(uuid="GPU-not-mine"))
    fake.handle_errors = {1: pynvml.NVMLError_NoPermission}
    sampler = NvmlSampler.open()
    assert [g.uuid for g in sampler.gpus()] == ["GPU-mine"]
    assert {row[2] for row in sampler.sample(T0)} == {0}
    assert sampler.last_error == "GPU 1: Insufficient Permissions"

    fake.handle_errors = {0: pynvml.NVMLError_NoPermission, 1: pynvml.NVMLError_NoPermission}
    with pytest.raises(NvmlUnavailable, match=r"^no NVIDIA GPU found \(GPU 0: Insufficient Permissions; GPU 1: "):
        NvmlSampler.open()


def test_a_target_tree_that_cannot_be_read_costs_only_the_process_rows(fake_nvml: Callable[..., FakeNvml]) -> None:
    fake_nvml(FakeGpu(processes=[(TARGET, 2**30)]))

    def vanished() -> set[int]:
        raise ProcessLookupError("process 4242 is gone")

    sampler = NvmlSampler.open(pids=vanished)
    rows = sampler.sample(T0)
    assert by_metric(rows)[S.GPU_UTIL] == 0.87 and by_metric(rows, pid=TARGET) == {}
    assert sampler.last_error == "target pids: ProcessLookupError: process 4242 is gone"


def test_through_the_sampling_loop_into_the_store(fake_nvml: Callable[..., FakeNvml], tmp_path: Path) -> None:
    """Two GPUs, one without power readings, sampled every 0.5 s for 3 s of a fake clock."""
    fake_nvml(FakeGpu(processes=[(TARGET, 2**30)], proc_sm_pct={TARGET: [60]}),
              FakeGpu(nvlink_links=0, fail={"nvmlDeviceGetPowerUsage": pynvml.NVMLError_NotSupported}))
    sampler = NvmlSampler.open(pids=lambda: {TARGET})
    with Store(tmp_path) as store:
        store.create_run(RunMeta(id="live", name="nvml", kind="attach", status="running", started_ns=T0))
        result = SamplingLoop(store, "live", [sampler], interval_s=0.5, duration_s=3.0, clock=FakeClock(T0)).run()
        saved = store.samples("live")
    assert result.status == "complete" and result.ticks == 7 and result.errors == ()
    assert len(saved) == result.rows and set(saved["source"]) == {S.NVML}
    per_gpu = saved.groupby("gpu")["metric"].agg(set)
    assert S.GPU_POWER_W in per_gpu[0] and S.GPU_POWER_W not in per_gpu[1]
    assert S.GPU_NVLINK_TX_BYTES_PER_S in per_gpu[0] and S.GPU_NVLINK_TX_BYTES_PER_S not in per_gpu[1]
    util = saved[(saved["gpu"] == 0) & (saved["metric"] == S.GPU_UTIL)]
    assert list(util["ts_ns"]) == [T0 + i * SECOND // 2 for i in range(7)] and set(util["value"]) == {0.87}
    target = saved[saved["pid"] == TARGET]
    assert set(target["gpu"]) == {0} and set(target["metric"]) == {S.PROC_GPU_MEMORY_BYTES, S.PROC_GPU_SM_UTIL,
                                                                    S.PROC_GPU_MEM_UTIL}
    assert pynvml.nvmlShutdown.call_count == 1, "the loop closes the sampler"


def test_every_device_call_exists_in_the_installed_binding_and_names_its_nvidia_smi_field() -> None:
    assert len({call.key for call in DEVICE_CALLS}) == len(DEVICE_CALLS)
    for call in DEVICE_CALLS:
        assert all(hasattr(pynvml, name) for name in call.functions), call.key
        assert all(isinstance(getattr(pynvml, name), int) for name in call.args), call.key
        assert call.smi.strip(), call.key
