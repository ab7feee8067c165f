"""Several processes on one GPU, and MIG instances, through NvmlSampler against NVML mocked at the binding."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from gpuscope.collectors.nvml import NvmlSampler
from gpuscope.model import schema as S
from gpuscope.model.schema import SampleRow, mig_gpu
from tests.collectors.nvml_fake import FakeGpu, FakeNvml, mig_instance, pynvml
from tests.collectors.tenants import apply, h200, recorded

T0 = 1_800_000_000_000_000_000
SECOND = 1_000_000_000


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., FakeNvml]]:
    def build(*gpus: FakeGpu) -> FakeNvml:
        return FakeNvml(list(gpus), monkeypatch)
    yield build


def rows_of(rows: list[SampleRow], pid: int, metric: str) -> list[float]:
    return [value for _ts, _source, _gpu, p, m, value in rows if p == pid and m == metric]


def test_a_light_process_beside_a_busy_one_gets_its_share_every_tick(fake_nvml: Callable[..., FakeNvml]) -> None:
    """The H200's recorded answers, tick by tick. NVML gives the light process a sample only when it used 1% or
    more; while the busy one ran it had none, so it used under 1%: its share is 0 at each such tick, never missing."""
    roles, ticks = recorded()
    light, heavy = roles["light"], roles["heavy"]
    gpu = h200()
    fake_nvml(gpu)
    sampler = NvmlSampler.open(pids=lambda: {light})
    expected_sm: list[float] = []
    expected_others: list[float] = []
    got: list[SampleRow] = []
    for i, tick in enumerate(ticks):
        apply(gpu, tick, ticks[i - 1].t_us if i else tick.t_us - 1_000_000, {light: light, heavy: heavy})
        got += sampler.sample(tick.t_us * 1000)
        # A reference from the recording itself: the light process's sample, 0 without one in an answer that came.
        if light in {p for p, _ in tick.processes} and tick.samples is not None:
            by_pid = {p: sm for p, _ts, sm, _mem in tick.samples}
            expected_sm.append(by_pid.get(light, 0) / 100)
            expected_others.append(by_pid.get(heavy, 0) / 100)
    assert rows_of(got, light, S.PROC_GPU_SM_UTIL) == pytest.approx(expected_sm)
    assert rows_of(got, S.NO_PID, S.GPU_OTHERS_SM_UTIL) == pytest.approx(expected_others)
    assert len(expected_sm) == 29 and expected_sm.count(0.0) == 28, "the recording: one sample of 2%, then none"
    assert max(expected_others) >= 0.98
    memory = rows_of(got, light, S.PROC_GPU_MEMORY_BYTES)
    assert len(memory) == 29 and set(memory) == {7132413952.0}
    assert set(rows_of(got, S.NO_PID, S.GPU_OTHER_PROCESSES)) == {1.0}
    assert rows_of(got, heavy, S.PROC_GPU_SM_UTIL) == [], "only the target's own processes are reported"
    assert sampler.errors == 0 and sampler.unsupported == {(0, "nvlink")}


def test_nothing_new_is_no_share_at_all(fake_nvml: Callable[..., FakeNvml]) -> None:
    """NOT_FOUND says nothing of anybody: no 0 for the target, no share for the others."""
    fake_nvml(FakeGpu(processes=[(4242, 2**30), (777, 2**30)]))
    sampler = NvmlSampler.open(pids=lambda: {4242})
    rows = sampler.sample(T0)
    assert rows_of(rows, 4242, S.PROC_GPU_SM_UTIL) == [] and rows_of(rows, S.NO_PID, S.GPU_OTHERS_SM_UTIL) == []
    assert rows_of(rows, S.NO_PID, S.GPU_OTHER_PROCESSES) == [1.0]


def test_stale_samples_do_not_make_an_answer_fresh(fake_nvml: Callable[..., FakeNvml]) -> None:
    """A driver that hands back a sample from before the previous tick has not sampled since: no 0 from it."""
    gpu = FakeGpu(processes=[(4242, 2**30)], proc_samples=[(777, -5, 90, 10)])  # 5 µs before the time asked
    fake_nvml(gpu)
    sampler = NvmlSampler.open(pids=lambda: {4242})
    assert rows_of(sampler.sample(T0), 4242, S.PROC_GPU_SM_UTIL) == []
    gpu.proc_samples = [(777, 200_000, 90, 10), (4242, 300_000, 7, 3)]
    rows = sampler.sample(T0 + SECOND)
    assert rows_of(rows, 4242, S.PROC_GPU_SM_UTIL) == [0.07] and rows_of(rows, 4242, S.PROC_GPU_MEM_UTIL) == [0.03]
    assert rows_of(rows, S.NO_PID, S.GPU_OTHERS_SM_UTIL) == [0.9]


def test_mig_instances_are_gpus_of_their_own(fake_nvml: Callable[..., FakeNvml]) -> None:
    """An H100 in MIG mode: the target runs in the 1g.10gb instance, someone else in the 3g.40gb one."""
    parent = FakeGpu(fail={"nvmlDeviceGetUtilizationRates": pynvml.NVMLError_NotSupported,
                           "nvmlDeviceGetProcessUtilization": pynvml.NVMLError_NotSupported})
    parent.mig = [mig_instance(parent, "1g.10gb", 9, processes=[(4242, 3 * 10**9)], memory_used_bytes=4 * 10**9),
                  mig_instance(parent, "3g.40gb", 2, processes=[(777, 20 * 10**9)])]
    whole = FakeGpu(uuid="GPU-whole")
    fake = fake_nvml(parent, whole)
    sampler = NvmlSampler.open(pids=lambda: {4242})
    info = {g.index: g for g in sampler.gpus()}
    assert set(info) == {0, 1, mig_gpu(0, 9), mig_gpu(0, 2)} == {0, 1, 1009, 1002}
    small = info[1009]
    assert (small.name, small.mig_profile, small.memory_bytes) == ("NVIDIA H100 80GB HBM3", "1g.10gb", 10 * 10**9)
    assert small.uuid is not None and small.uuid.startswith("MIG-") and info[1002].mig_profile == "3g.40gb"
    assert info[0].mig_profile is None and info[0].name == "NVIDIA H100 80GB HBM3"

    rows = [row for _ in range(3) for row in sampler.sample(T0)]
    per = {(g, p, m) for _ts, _s, g, p, m, _v in rows}
    assert (1009, 4242, S.PROC_GPU_MEMORY_BYTES) in per and (1009, S.NO_PID, S.GPU_MEMORY_USED_BYTES) in per
    assert not {m for g, _p, m in per if g == 1009} & {S.GPU_UTIL, S.GPU_POWER_W, S.GPU_TEMPERATURE_C}
    assert {g for g, p, _m in per if p == 4242} == {1009}, "never counted on the parent too"
    assert sampler.target_gpus() == {1009}
    parent_process_calls = [c for c in fake.mocks["nvmlDeviceGetComputeRunningProcesses"].call_args_list
                            if c.args[0].index == 0 and getattr(c.args[0], "slot", None) is None]
    assert parent_process_calls == [], "a GPU in MIG mode lists its processes per instance"
    power_calls = [c for c in fake.mocks["nvmlDeviceGetPowerUsage"].call_args_list
                   if getattr(c.args[0], "slot", None) is not None]
    assert power_calls == [], "a MIG instance is asked only what it answers for itself"
    assert sampler.errors == 0
