"""dcgm-exporter's fields and labels: which DCGM field becomes which gpuscope metric, in which unit; which device a
series' labels name; and which values are DCGM's "blank" sentinels. Read by the live collector (``collectors.dcgm``,
one scrape at a time) and by fleet mode (``fleet.query``, the same fields through Prometheus)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuscope.model.schema import (
    GPU_DRAM_ACTIVE,
    GPU_ENERGY_J,
    GPU_GR_ENGINE_ACTIVE,
    GPU_MEM_CLOCK_MHZ,
    GPU_MEM_UTIL,
    GPU_MEMORY_FREE_BYTES,
    GPU_MEMORY_TEMPERATURE_C,
    GPU_MEMORY_TOTAL_BYTES,
    GPU_MEMORY_USED_BYTES,
    GPU_NVLINK_RX_BYTES_PER_S,
    GPU_NVLINK_TX_BYTES_PER_S,
    GPU_PCIE_RX_BYTES_PER_S,
    GPU_PCIE_TX_BYTES_PER_S,
    GPU_POWER_LIMIT_W,
    GPU_POWER_W,
    GPU_SM_ACTIVE,
    GPU_SM_CLOCK_MHZ,
    GPU_SM_OCCUPANCY,
    GPU_TEMPERATURE_C,
    GPU_TENSOR_ACTIVE,
    GPU_THROTTLE_REASONS,
    GPU_UTIL,
    MIG_GPU_BASE,
    mig_gpu,
)

_MIB = 2**20
_FRACTION_SLACK = 1e-6
"""How far past 1 a fraction may read (rounding) and still count, as 1."""


@dataclass(frozen=True)
class Field:
    """How one DCGM field becomes a sample."""

    metric: str
    scale: float = 1.0
    fraction: bool = False
    """The scaled value must lie in 0..1 (a larger one is garbage and dropped)."""
    wide: bool = False
    """The value can legitimately reach 2**31 (energy, byte rates), so DCGM's int32 sentinels do not apply."""
    rank: int = 0
    """Where two fields give one metric, the lower rank wins."""


FIELDS: dict[str, Field] = {
    # DEV utilizations are percent (0..100); PROF fields are already ratios (0..1).
    "dev_gpu_util": Field(GPU_UTIL, 0.01, fraction=True),
    "dev_mem_copy_util": Field(GPU_MEM_UTIL, 0.01, fraction=True),
    "dev_fb_used": Field(GPU_MEMORY_USED_BYTES, _MIB),
    "dev_fb_free": Field(GPU_MEMORY_FREE_BYTES, _MIB),
    "dev_fb_total": Field(GPU_MEMORY_TOTAL_BYTES, _MIB),
    "dev_power_usage": Field(GPU_POWER_W),
    "dev_enforced_power_limit": Field(GPU_POWER_LIMIT_W),
    "dev_power_mgmt_limit": Field(GPU_POWER_LIMIT_W, rank=1),
    "dev_total_energy_consumption": Field(GPU_ENERGY_J, 1e-3, wide=True),  # mJ since boot
    "dev_sm_clock": Field(GPU_SM_CLOCK_MHZ),
    "dev_mem_clock": Field(GPU_MEM_CLOCK_MHZ),
    "dev_gpu_temp": Field(GPU_TEMPERATURE_C),
    "dev_memory_temp": Field(GPU_MEMORY_TEMPERATURE_C),
    "dev_clocks_event_reasons": Field(GPU_THROTTLE_REASONS),
    "dev_clock_throttle_reasons": Field(GPU_THROTTLE_REASONS, rank=1),  # the pre-2023 name
    "prof_sm_active": Field(GPU_SM_ACTIVE, fraction=True),
    "prof_sm_occupancy": Field(GPU_SM_OCCUPANCY, fraction=True),
    "prof_pipe_tensor_active": Field(GPU_TENSOR_ACTIVE, fraction=True),
    "prof_dram_active": Field(GPU_DRAM_ACTIVE, fraction=True),
    "prof_gr_engine_active": Field(GPU_GR_ENGINE_ACTIVE, fraction=True),
    # Despite "_BYTES", DCGM documents these four as rates in bytes per second.
    "prof_pcie_tx_bytes": Field(GPU_PCIE_TX_BYTES_PER_S, wide=True),
    "prof_pcie_rx_bytes": Field(GPU_PCIE_RX_BYTES_PER_S, wide=True),
    "prof_nvlink_tx_bytes": Field(GPU_NVLINK_TX_BYTES_PER_S, wide=True),
    "prof_nvlink_rx_bytes": Field(GPU_NVLINK_RX_BYTES_PER_S, wide=True),
}
"""DCGM field (lowercase, without the DCGM_FI_ prefix) -> sample. Fields not listed are ignored."""

OLD_NAMES: dict[str, str] = {
    "dcgm_sm_clock": "dev_sm_clock",
    "dcgm_memory_clock": "dev_mem_clock",
    "dcgm_gpu_temp": "dev_gpu_temp",
    "dcgm_memory_temp": "dev_memory_temp",
    "dcgm_power_usage": "dev_power_usage",
    "dcgm_total_energy_consumption": "dev_total_energy_consumption",
    "dcgm_gpu_utilization": "dev_gpu_util",
    "dcgm_mem_copy_utilization": "dev_mem_copy_util",
    "dcgm_fb_free": "dev_fb_free",
    "dcgm_fb_used": "dev_fb_used",
}
"""dcgm-exporter 1.x metric names (etc/1.x-compatibility-metrics.csv) -> DCGM field."""


@dataclass(frozen=True)
class DcgmDevice:
    """What a scrape's labels say about one ``gpu`` column value; a label the exporter left out is None."""

    gpu: int
    """Physical index, or ``schema.mig_gpu(parent, GPU_I_ID)`` for a MIG instance."""
    parent: int
    uuid: str | None = None
    model: str | None = None
    hostname: str | None = None
    pci_bus_id: str | None = None
    mig_profile: str | None = None
    """e.g. "3g.40gb"; None outside MIG or where DCGM printed "<<<NULL>>>"."""
    mig_instance: int | None = None
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None


def field_of(name: str) -> Field | None:
    lower = name.lower()
    key = OLD_NAMES.get(lower) or lower.removeprefix("dcgm_fi_")
    return FIELDS.get(key)


def device_of(labels: dict[str, str]) -> DcgmDevice | None:
    """The device a series belongs to, from lowercased labels; None without a usable ``gpu`` label."""
    try:
        parent = int(labels["gpu"])
        instance = labels.get("gpu_i_id")
        mig = int(instance) if instance is not None else None
        gpu = mig_gpu(parent, mig) if mig is not None else parent
    except (KeyError, ValueError):
        return None
    if parent < 0 or (mig is None and parent >= MIG_GPU_BASE):  # not a GPU index, or one posing as a MIG instance
        return None
    profile = labels.get("gpu_i_profile")
    return DcgmDevice(
        gpu=gpu,
        parent=parent,
        uuid=labels.get("uuid") or None,
        model=labels.get("modelname") or None,
        hostname=labels.get("hostname") or None,
        pci_bus_id=labels.get("pci_bus_id") or None,
        mig_profile=profile if profile and profile != "<<<NULL>>>" else None,
        mig_instance=mig,
        pod=labels.get("pod") or labels.get("pod_name") or None,
        namespace=labels.get("namespace") or labels.get("pod_namespace") or None,
        container=labels.get("container") or labels.get("container_name") or None,
    )


def field_value(raw: float, field: Field) -> float | None:
    """The value in gpuscope's units, or None where DCGM says "not available" or it cannot be right."""
    try:
        number = float(raw)  # the parser gives an int for an integer, which may be past any double
    except OverflowError:
        return None
    if not math.isfinite(number) or number < 0 or _is_blank(number, wide=field.wide):
        return None
    value = number * field.scale
    if field.fraction:
        if value > 1.0 + _FRACTION_SLACK:
            return None
        value = min(value, 1.0)
    return value


def _is_blank(value: float, *, wide: bool) -> bool:
    """DCGM's sentinels: the top 16 values of int32 and int64 (blank, not found, not supported,
    no permission, ...) and the 16 doubles from 2**47 (dcgm_structs.h DCGM_*_BLANK and its neighbours).
    A field that is not wide never reaches the int32 ones for real (2**31 MiB, W, MHz or degrees), so anything
    from there up is a blank or garbage."""
    if value >= 0x7FFFFFFFFFFFFFF0:  # an int from the parser, or a double rounded to 2**63
        return True
    if 2.0**47 <= value < 2.0**47 + 16:
        return True
    return not wide and value >= 0x7FFFFFF0
