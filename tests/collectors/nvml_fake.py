"""NVML mocked at the binding: each pynvml function the collector uses is replaced by an autospec of the real
one (so a wrong signature fails the test), answering from a small model of the GPUs in the machine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock, create_autospec

import pytest

pynvml = pytest.importorskip("pynvml")

FUNCTIONS = (
    "nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetName",
    "nvmlDeviceGetUUID", "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetClockInfo", "nvmlDeviceGetTemperature",
    "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetProcessUtilization", "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetNvLinkVersion", "nvmlDeviceGetTopologyCommonAncestor",
)


@dataclass
class FakeGpu:
    """What one GPU reports; ``fail`` maps a binding function to the NVMLError class it raises."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-5e1f0000-0000-0000-0000-000000000000"
    capability: tuple[int, int] = (9, 0)
    util_pct: tuple[int, int] = (87, 41)
    memory_used_bytes: int = 30 * 2**30
    memory_total_bytes: int = 80 * 2**30
    power_mw: int = 512_250
    limit_mw: int = 700_000
    energy_mj: int = 123_456_789
    sm_mhz: int = 1980
    mem_mhz: int = 2619
    temp_c: int = 64
    reasons: int = 0x4  # SW power cap
    pcie_kbs: tuple[int, int] = (1000, 250_000)  # TX, RX
    nvlink_links: int = 18
    nvlink_version: int = int(pynvml.NVML_NVLINK_VERSION_4_0)
    """What nvmlDeviceGetNvLinkVersion answers: NVML's enum code (6 for an H100's NVLink 4.0), not the version."""
    pcie_gen: int = 5
    pcie_width: int = 16
    topology: dict[int, str] = field(default_factory=dict)
    """Other GPU's index -> the NVML_TOPOLOGY_* level name between them (default: SYSTEM)."""
    nvlink_kib_per_s: tuple[int, int] = (2_000_000, 1_000_000)  # TX, RX
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    """(pid, used GPU memory bytes or None when NVML cannot tell)."""
    proc_sm_pct: dict[int, list[int]] = field(default_factory=dict)
    """pid -> SM % samples returned by the next process-utilization query."""
    fail: dict[str, type[Exception]] = field(default_factory=dict)
    field_reads: int = 0


class FakeNvml:
    """The machine: a list of FakeGpu answered through autospecced pynvml functions."""

    def __init__(self, gpus: list[FakeGpu], monkeypatch: pytest.MonkeyPatch) -> None:
        self.gpus = gpus
        self.init_error: type[Exception] | None = None
        self.handle_errors: dict[int, type[Exception]] = {}
        self.mocks: dict[str, MagicMock] = {}
        for name in FUNCTIONS:
            impl = getattr(self, "_" + name, None) or self._device(name)
            mock = create_autospec(getattr(pynvml, name), side_effect=impl)
            monkeypatch.setattr(pynvml, name, mock)
            self.mocks[name] = mock

    def calls(self, name: str, gpu: int | None = None) -> int:
        mock = self.mocks[name]
        if gpu is None:
            return mock.call_count
        return sum(1 for c in mock.call_args_list if c.args and getattr(c.args[0], "index", None) == gpu)

    # -- library -----------------------------------------------------------------------------------

    def _nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error()

    def _nvmlShutdown(self) -> None:
        return None

    def _nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def _nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        if index in self.handle_errors:
            raise self.handle_errors[index]()
        return SimpleNamespace(index=index)

    # -- devices -----------------------------------------------------------------------------------

    def _device(self, name: str) -> Callable[..., Any]:
        answer: Callable[..., Any] = getattr(self, "_answer_" + name.removeprefix("nvmlDeviceGet"))

        def call(handle: SimpleNamespace, *args: Any) -> Any:
            gpu = self.gpus[handle.index]
            if name in gpu.fail:
                raise gpu.fail[name]()
            return answer(gpu, *args)
        return call

    def _answer_Name(self, gpu: FakeGpu) -> str:
        return gpu.name

    def _answer_UUID(self, gpu: FakeGpu) -> str:
        return gpu.uuid

    def _answer_CudaComputeCapability(self, gpu: FakeGpu) -> tuple[int, int]:
        return gpu.capability

    def _answer_MemoryInfo(self, gpu: FakeGpu, version: Any = None) -> SimpleNamespace:
        return SimpleNamespace(used=gpu.memory_used_bytes, total=gpu.memory_total_bytes,
                               free=gpu.memory_total_bytes - gpu.memory_used_bytes)

    def _answer_UtilizationRates(self, gpu: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(gpu=gpu.util_pct[0], memory=gpu.util_pct[1])

    def _answer_PowerUsage(self, gpu: FakeGpu) -> int:
        return gpu.power_mw

    def _answer_EnforcedPowerLimit(self, gpu: FakeGpu) -> int:
        return gpu.limit_mw

    def _answer_TotalEnergyConsumption(self, gpu: FakeGpu) -> int:
        return gpu.energy_mj

    def _answer_ClockInfo(self, gpu: FakeGpu, kind: int) -> int:
        return {pynvml.NVML_CLOCK_SM: gpu.sm_mhz, pynvml.NVML_CLOCK_MEM: gpu.mem_mhz}[kind]

    def _answer_Temperature(self, gpu: FakeGpu, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return gpu.temp_c

    def _answer_CurrentClocksEventReasons(self, gpu: FakeGpu) -> int:
        return gpu.reasons

    _answer_CurrentClocksThrottleReasons = _answer_CurrentClocksEventReasons

    def _answer_PcieThroughput(self, gpu: FakeGpu, counter: int) -> int:
        return gpu.pcie_kbs[0] if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else gpu.pcie_kbs[1]

    def _answer_NvLinkState(self, gpu: FakeGpu, link: int) -> int:
        if gpu.nvlink_links == 0:
            raise pynvml.NVMLError_NotSupported()
        if link >= gpu.nvlink_links:
            raise pynvml.NVMLError_InvalidArgument()
        return int(pynvml.NVML_FEATURE_ENABLED)

    def _answer_NvLinkVersion(self, gpu: FakeGpu, link: int) -> int:
        if link >= gpu.nvlink_links:
            raise pynvml.NVMLError_InvalidArgument()
        return gpu.nvlink_version

    def _answer_CurrPcieLinkGeneration(self, gpu: FakeGpu) -> int:
        return gpu.pcie_gen

    def _answer_CurrPcieLinkWidth(self, gpu: FakeGpu) -> int:
        return gpu.pcie_width

    def _answer_TopologyCommonAncestor(self, gpu: FakeGpu, other: SimpleNamespace) -> int:
        return int(getattr(pynvml, "NVML_TOPOLOGY_" + gpu.topology.get(other.index, "SYSTEM")))

    def _answer_FieldValues(self, gpu: FakeGpu, field_ids: list[tuple[int, int]]) -> Any:
        """Cumulative KiB counters read one second apart on each call (NVML's µs timestamps)."""
        gpu.field_reads += 1
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for value, (field_id, scope) in zip(values, field_ids, strict=True):
            value.fieldId, value.scopeId = field_id, scope
            value.timestamp = gpu.field_reads * 1_000_000
            value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            rate = gpu.nvlink_kib_per_s[0 if field_id == pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX else 1]
            value.value.ullVal = 10**9 + rate * gpu.field_reads
            value.nvmlReturn = pynvml.NVML_SUCCESS if gpu.nvlink_links else pynvml.NVML_ERROR_NOT_SUPPORTED
        return values

    def _answer_ComputeRunningProcesses(self, gpu: FakeGpu) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in gpu.processes]

    _answer_ComputeRunningProcesses_v2 = _answer_ComputeRunningProcesses

    def _answer_ProcessUtilization(self, gpu: FakeGpu, since_us: int) -> list[Any]:
        samples = [pynvml.c_nvmlProcessUtilizationSample_t(pid, since_us + 1 + i, pct, 0, 0, 0)
                   for pid, pcts in gpu.proc_sm_pct.items() for i, pct in enumerate(pcts)]
        if not samples:
            raise pynvml.NVMLError_NotFound()  # nothing ran since since_us: NVML's normal answer
        return samples
