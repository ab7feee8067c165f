"""What NVML is asked for each GPU on every tick, and the rows each answer gives.

A table, not code: each entry names the binding function(s) (newest first), the constant arguments,
how the answer becomes rows in gpuscope's units, and the ``nvidia-smi`` field that shows the same
number so a user can check it. ``nvml.py`` makes the calls; nothing here imports the binding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuscope.model.schema import (
    GPU_ENERGY_J,
    GPU_MEM_CLOCK_MHZ,
    GPU_MEM_UTIL,
    GPU_MEMORY_TOTAL_BYTES,
    GPU_MEMORY_USED_BYTES,
    GPU_PCIE_RX_BYTES_PER_S,
    GPU_PCIE_TX_BYTES_PER_S,
    GPU_POWER_LIMIT_W,
    GPU_POWER_W,
    GPU_SM_CLOCK_MHZ,
    GPU_TEMPERATURE_C,
    GPU_THROTTLE_REASONS,
    GPU_UTIL,
)

# NVML reports PCIe throughput in "KB/s", from a byte counter read over 20 ms (so each call takes about
# 20 ms); like nvitop we read KB as KiB. NVLink's throughput fields count KiB too.
KIB = 1024

Reader = Callable[[Any], list[tuple[str, float]]]


@dataclass(frozen=True)
class DeviceCall:
    """One device query made once per tick per GPU, and the rows its result gives."""

    key: str
    """Name in the unsupported set, e.g. "power"."""
    functions: tuple[str, ...]
    """Binding functions, newest first: the next is tried when the binding or driver lacks one."""
    args: tuple[str, ...]
    """Names of pynvml constants passed after the handle."""
    read: Reader
    smi: str
    """The ``nvidia-smi`` field that shows the same number."""


def _scaled(metric: str, factor: float) -> Reader:
    return lambda value: [(metric, float(value) * factor)]


def _utilization(rates: Any) -> list[tuple[str, float]]:
    return [(GPU_UTIL, rates.gpu / 100.0), (GPU_MEM_UTIL, rates.memory / 100.0)]


def _memory(info: Any) -> list[tuple[str, float]]:
    return [(GPU_MEMORY_USED_BYTES, float(info.used)), (GPU_MEMORY_TOTAL_BYTES, float(info.total))]


DEVICE_CALLS: tuple[DeviceCall, ...] = (
    # Share of the last sample period (1/6 s to 1 s) in which a kernel ran: not SM occupancy.
    DeviceCall("utilization", ("nvmlDeviceGetUtilizationRates",), (), _utilization,
                "utilization.gpu, utilization.memory"),
    DeviceCall("memory", ("nvmlDeviceGetMemoryInfo",), (), _memory, "memory.used, memory.total"),
    DeviceCall("power", ("nvmlDeviceGetPowerUsage",), (), _scaled(GPU_POWER_W, 1e-3), "power.draw"),
    DeviceCall("power_limit", ("nvmlDeviceGetEnforcedPowerLimit",), (), _scaled(GPU_POWER_LIMIT_W, 1e-3),
                "enforced.power.limit"),
    # mJ since the driver loaded (Volta and newer); a job's energy is the difference of two samples.
    DeviceCall("energy", ("nvmlDeviceGetTotalEnergyConsumption",), (), _scaled(GPU_ENERGY_J, 1e-3),
                "no nvidia-smi field; DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
    DeviceCall("sm_clock", ("nvmlDeviceGetClockInfo",), ("NVML_CLOCK_SM",), _scaled(GPU_SM_CLOCK_MHZ, 1.0),
                "clocks.sm"),
    DeviceCall("mem_clock", ("nvmlDeviceGetClockInfo",), ("NVML_CLOCK_MEM",), _scaled(GPU_MEM_CLOCK_MHZ, 1.0),
                "clocks.mem"),
    DeviceCall("temperature", ("nvmlDeviceGetTemperature",), ("NVML_TEMPERATURE_GPU",),
                _scaled(GPU_TEMPERATURE_C, 1.0), "temperature.gpu"),
    # Bitmask: idle 0x1, app clocks 0x2, SW power cap 0x4, HW slowdown 0x8, sync boost 0x10, SW thermal 0x20,
    # HW thermal 0x40, power brake 0x80. Drivers before r535 only have the "throttle" spelling.
    DeviceCall("throttle_reasons",
                ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), (),
                _scaled(GPU_THROTTLE_REASONS, 1.0), "clocks_event_reasons.active (clocks_throttle_reasons.active)"),
    DeviceCall("pcie_tx", ("nvmlDeviceGetPcieThroughput",), ("NVML_PCIE_UTIL_TX_BYTES",),
                _scaled(GPU_PCIE_TX_BYTES_PER_S, KIB), "nvidia-smi dmon -s t, txpci"),
    DeviceCall("pcie_rx", ("nvmlDeviceGetPcieThroughput",), ("NVML_PCIE_UTIL_RX_BYTES",),
                _scaled(GPU_PCIE_RX_BYTES_PER_S, KIB), "nvidia-smi dmon -s t, rxpci"),
)
"""Device-wide queries made every tick, in order."""
