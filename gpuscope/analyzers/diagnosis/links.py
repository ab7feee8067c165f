"""What the link between a job's GPUs can carry, per direction, from the GPU model a trace names.

Numbers are the vendors' datasheet figures, per GPU and per direction (half the bidirectional totals NVIDIA
quotes): NVLink on SXM/OAM parts, PCIe for cards without it. A trace does not say which path its collectives
took (NVLink inside a node, PCIe or the network across nodes), so this is the fastest path the GPU has: bus
bandwidth near it means the link is the limit; far under it, with small messages, latency and launches are.

Sources: NVIDIA V100 datasheet (NVLink 300 GB/s bidirectional), A100 datasheet (NVLink 600 GB/s), H100 and H200
datasheets (NVLink 900 GB/s), B200/DGX B200 datasheet (NVLink 1.8 TB/s), AMD Instinct MI300X datasheet (Infinity
Fabric 896 GB/s peak aggregate); PCI-SIG: PCIe 3.0/4.0/5.0 x16 about 16/32/64 GB/s per direction.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuscope.model.run import GpuInfo


@dataclass(frozen=True)
class Link:
    name: str
    gbps: float
    """GB/s per direction (1e9 bytes per second)."""


# (substring of the upper-cased model name, link): first match wins, so specific names come first.
_LINKS: tuple[tuple[str, Link], ...] = (
    ("B200", Link("NVLink 5", 900.0)),
    ("H200", Link("NVLink 4", 450.0)),
    ("H100 PCIE", Link("PCIe 5.0 x16", 64.0)),
    ("H100", Link("NVLink 4", 450.0)),
    ("A100-PCIE", Link("PCIe 4.0 x16", 32.0)),
    ("A100 PCIE", Link("PCIe 4.0 x16", 32.0)),
    ("A100", Link("NVLink 3", 300.0)),
    ("V100-SXM", Link("NVLink 2", 150.0)),
    ("V100-DGXS", Link("NVLink 2", 100.0)),
    ("V100", Link("PCIe 3.0 x16", 16.0)),
    ("MI300X", Link("Infinity Fabric", 448.0)),
    ("L40S", Link("PCIe 4.0 x16", 32.0)),
    ("L40", Link("PCIe 4.0 x16", 32.0)),
    ("L4", Link("PCIe 4.0 x16", 32.0)),
    ("A10", Link("PCIe 4.0 x16", 32.0)),
    ("T4", Link("PCIe 3.0 x16", 16.0)),
)


NVLINK_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
"""Per link and direction, by NVLink version (NVLink 2-4 carry 25 GB/s, NVLink 5 50 GB/s a link)."""
PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
"""Per lane and direction, after line coding (PCI-SIG)."""


def measured_link(gpu: GpuInfo) -> Link | None:
    """The link a live run's GPU reported through NVML: its active NVLink links, else its PCIe generation and
    width; None when NVML told neither."""
    if gpu.nvlink_links and gpu.nvlink_version in NVLINK_GBPS_PER_LINK:
        return Link(f"NVLink {gpu.nvlink_version} x{gpu.nvlink_links}",
                    gpu.nvlink_links * NVLINK_GBPS_PER_LINK[gpu.nvlink_version])
    if gpu.pcie_gen in PCIE_GBPS_PER_LANE and gpu.pcie_width:
        return Link(f"PCIe {gpu.pcie_gen}.0 x{gpu.pcie_width}", PCIE_GBPS_PER_LANE[gpu.pcie_gen] * gpu.pcie_width)
    return None


def link_of(model: str | None) -> Link | None:
    """The fastest GPU-to-GPU link of a GPU model; None for a model not in the table."""
    if not model:
        return None
    upper = model.upper()
    return next((link for key, link in _LINKS if key in upper), None)
