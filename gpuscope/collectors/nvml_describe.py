"""What NVML says of each GPU once, at open: its name, memory, power limit, PCIe link and the path to its peers.

One-off queries: an error leaves that field None (the per-tick calls in ``nvml.py`` keep their own bookkeeping).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuscope.collectors import nvml_mig
from gpuscope.model.gpu import GpuInfo

# NVML's common-ancestor levels (nvmlGpuTopologyLevel_t) in gpuscope's words, nearest first.
_TOPOLOGY = {"INTERNAL": "same_board", "SINGLE": "pcie_switch", "MULTIPLE": "pcie_switches",
             "HOSTBRIDGE": "host_bridge", "NODE": "cpu_socket", "SYSTEM": "across_sockets"}


def describe(nvml: Any, handle: Any, index: int, *, mig: bool = False) -> GpuInfo:
    """The GPU (or, with ``mig``, the MIG instance) as NVML describes it; a field NVML could not tell is None.
    A MIG instance is named by its parent's model and its profile (``1g.10gb``); it has no power limit or link
    of its own."""
    def ask(function: str) -> Any:
        fn = getattr(nvml, function, None)
        if fn is None:
            return None
        try:
            return fn(handle)
        except nvml.NVMLError:
            return None

    model, profile = nvml_mig.split_name(_text(ask("nvmlDeviceGetName")))
    memory = ask("nvmlDeviceGetMemoryInfo")
    if mig:
        return GpuInfo(index=index, name=model, uuid=_text(ask("nvmlDeviceGetUUID")),
                       memory_bytes=int(memory.total) if memory is not None else None,
                       mig_profile=profile or nvml_mig.profile_from_attributes(nvml, handle))
    limit_mw = ask("nvmlDeviceGetEnforcedPowerLimit")
    capability = ask("nvmlDeviceGetCudaComputeCapability")
    gen = ask("nvmlDeviceGetCurrPcieLinkGeneration")
    width = ask("nvmlDeviceGetCurrPcieLinkWidth")
    return GpuInfo(
        index=index,
        name=model,
        uuid=_text(ask("nvmlDeviceGetUUID")),
        memory_bytes=int(memory.total) if memory is not None else None,
        power_limit_w=limit_mw / 1000.0 if limit_mw is not None else None,
        compute_capability=f"{capability[0]}.{capability[1]}" if capability is not None else None,
        pcie_gen=int(gen) if gen else None,
        pcie_width=int(width) if width else None,
    )


def peers(nvml: Any, handle: Any, others: Sequence[tuple[int, Any]]) -> tuple[tuple[int, str], ...]:
    """The PCIe path to every other GPU, given as (index, handle) (NVML's common ancestor); pairs NVML cannot
    tell are left out."""
    ancestor = getattr(nvml, "nvmlDeviceGetTopologyCommonAncestor", None)
    if ancestor is None:
        return ()
    names = {getattr(nvml, f"NVML_TOPOLOGY_{k}", None): v for k, v in _TOPOLOGY.items()}
    out = []
    for index, other in others:
        try:
            level = ancestor(handle, other)
        except nvml.NVMLError:
            continue
        if level in names:
            out.append((index, names[level]))
    return tuple(out)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)
