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


def link_of(model: str | None) -> Link | None:
    """The fastest GPU-to-GPU link of a GPU model; None for a model not in the table."""
    if not model:
        return None
    upper = model.upper()
    return next((link for key, link in _LINKS if key in upper), None)
