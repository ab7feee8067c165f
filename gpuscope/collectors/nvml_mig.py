"""MIG instances through NVML: each one a GPU of its own in the ``gpu`` column (``schema.mig_gpu(parent, GPU
instance id)``, the numbering DCGM's GPU_I_ID gives too), found through the parent's MIG device handles.

A MIG device handle answers for its instance's memory and processes; utilization (device and per process), power,
clocks and the like belong to the parent GPU or are not there at all on MIG (nvml.h: "MIG device handles"), so only
the instance's own queries are asked of it. Its busy share comes from DCGM's GR_ENGINE_ACTIVE where a dcgm-exporter
is scraped. On a parent in MIG mode the process list is per instance: it is asked of the instances, never of the
parent, so a process is never counted on both.
"""

from __future__ import annotations

import re
from typing import Any

from gpuscope.model.schema import mig_gpu

INSTANCE_CALLS = frozenset({"memory"})
"""Device queries (``nvml_calls.DEVICE_CALLS`` keys) a MIG instance answers for itself."""
_PROFILE_IN_NAME = re.compile(r"\s+MIG\s+(\S+)\s*$")
"""NVML names an instance "<parent's name> MIG 1g.10gb"."""


def mig_enabled(nvml: Any, handle: Any) -> bool:
    """Whether the GPU runs in MIG mode now (``nvidia-smi --query-gpu=mig.mode.current``)."""
    get_mode = getattr(nvml, "nvmlDeviceGetMigMode", None)
    if get_mode is None:
        return False
    try:
        current, _pending = get_mode(handle)
    except nvml.NVMLError:
        return False  # NotSupported: a GPU without MIG
    return bool(current == nvml.NVML_DEVICE_MIG_ENABLE)


def instances(nvml: Any, parent: int, handle: Any) -> list[tuple[int, Any]]:
    """(``gpu`` column value, MIG device handle) of each instance on GPU ``parent`` (``nvidia-smi -L``)."""
    try:
        slots = int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
    except nvml.NVMLError:
        return []
    found: list[tuple[int, Any]] = []
    for slot in range(slots):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            found.append((mig_gpu(parent, int(nvml.nvmlDeviceGetGpuInstanceId(mig))), mig))
        except nvml.NVMLError:
            continue  # an empty slot (NotFound) or one that went away
    return found


def split_name(name: str | None) -> tuple[str | None, str | None]:
    """(the parent GPU's model name, the MIG profile) of an NVML device name; a whole GPU's profile is None."""
    if name is None:
        return None, None
    match = _PROFILE_IN_NAME.search(name)
    if match is None:
        return name, None
    return name[:match.start()], match.group(1)


def profile_from_attributes(nvml: Any, handle: Any) -> str | None:
    """"<slices>g.<GB>gb" from the instance's attributes, for a driver whose name leaves the profile out."""
    get = getattr(nvml, "nvmlDeviceGetAttributes", None)
    if get is None:
        return None
    try:
        attrs = get(handle)
    except nvml.NVMLError:
        return None
    slices, memory_mb = int(attrs.gpuInstanceSliceCount), int(attrs.memorySizeMB)
    return f"{slices}g.{round(memory_mb / 1024)}gb" if slices > 0 and memory_mb > 0 else None
