"""One GPU as a run, a trace or a fleet saw it: what every source of GPUs describes in the same terms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Vendor = Literal["nvidia", "amd"]
"""Whose GPU: NVIDIA's (CUDA) or AMD's (ROCm/HIP)."""


@dataclass(frozen=True)
class GpuInfo:
    """One GPU a run used. Any field the source could not tell is None (never 0)."""

    index: int
    name: str | None = None
    """Model name as NVML or the trace's deviceProperties spell it, e.g. "NVIDIA H100 80GB HBM3"."""
    uuid: str | None = None
    memory_bytes: int | None = None
    power_limit_w: float | None = None
    sm_count: int | None = None
    compute_capability: str | None = None
    """"major.minor", e.g. "7.0"."""
    pcie_gen: int | None = None
    """Current PCIe link generation and width (NVML; ``nvidia-smi -q``: "Link Width", "PCIe Generation")."""
    pcie_width: int | None = None
    nvlink_links: int | None = None
    """Active NVLink links (0: none; ``nvidia-smi nvlink -s``); None when not read."""
    nvlink_version: int | None = None
    """NVML's NVLink version code as ``nvmlDeviceGetNvLinkVersion`` returns it (an ``nvmlNvlinkVersion_t``: 6 is
    NVLink 4.0, 7 NVLink 5.0), not the version itself; ``analyzers.diagnosis.links`` reads it. None when not read."""
    peers: tuple[tuple[int, str], ...] = ()
    """(other GPU's index, the path between them) from NVML's common ancestor (``nvidia-smi topo -m``):
    "same_board", "pcie_switch", "pcie_switches", "host_bridge", "cpu_socket", "across_sockets"."""
    mig_profile: str | None = None
    """The MIG instance's profile ("1g.10gb") when this GPU is one (``index`` is then ``schema.mig_gpu(parent,
    GPU instance id)``; ``name`` is the parent's model); None for a whole GPU."""
