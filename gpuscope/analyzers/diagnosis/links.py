"""What the link between a job's GPUs can carry, per direction, from the GPU model a trace names.

Numbers are the vendors' datasheet figures, per GPU and per direction (half the bidirectional totals NVIDIA
quotes): NVLink on SXM/OAM parts, PCIe for cards without it. A trace does not say which path its collectives
took (NVLink inside a node, PCIe or the network across nodes), so this is the fastest path the GPU has: bus
bandwidth near it means the link is the limit; far under it, with small messages, latency and launches are.

Sources: NVIDIA V100 datasheet (NVLink 300 GB/s bidirectional), A100 datasheet (NVLink 600 GB/s), H100 and H200
datasheets (NVLink 900 GB/s), H100 NVL and H200 NVL product briefs (NVLink bridge 600 and 900 GB/s), B200/DGX B200
datasheet (NVLink 1.8 TB/s), AMD Instinct MI300X datasheet (Infinity Fabric 896 GB/s peak aggregate); PCI-SIG: PCIe
3.0/4.0/5.0 x16 about 16/32/64 GB/s per direction. PCIe cards (A100 PCIe 40/80GB, H100 PCIe) are PCIe whatever
else their names say.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpuscope.model.gpu import GpuInfo
from gpuscope.model.rank import RankReport

SMALL_MESSAGE_BYTES = 2**20


@dataclass(frozen=True)
class Link:
    name: str
    gbps: float
    """GB/s per direction (1e9 bytes per second)."""


@dataclass(frozen=True)
class BusBandwidth:
    """What a run's collectives moved: nccl-tests' bus bandwidth, weighted by each collective's time."""

    gbps: float
    small_message_share: float
    """Share of collective time in messages under 1 MiB."""


def bus_bandwidth(ranks: Sequence[RankReport]) -> BusBandwidth | None:
    """The time-weighted bus bandwidth of every rank's sized collectives; None when none has its sizes."""
    stats = [c for r in ranks for c in r.communication.collectives if c.busbw_gbps is not None]
    time_us = sum(c.time_us for c in stats)
    if not stats or time_us <= 0:
        return None
    busbw = sum((c.busbw_gbps or 0.0) * c.time_us for c in stats) / time_us
    small = sum(c.time_us for c in stats if c.bytes / c.count < SMALL_MESSAGE_BYTES) / time_us
    return BusBandwidth(busbw, small)


PCIE3 = Link("PCIe 3.0 x16", 16.0)
PCIE4 = Link("PCIe 4.0 x16", 32.0)
PCIE5 = Link("PCIe 5.0 x16", 64.0)


@dataclass(frozen=True)
class _Model:
    """GPU models whose names match ``pattern`` (over the upper-cased name, words split on spaces, '-', '_')."""

    pattern: re.Pattern[str]
    link: Link
    bridge_gpus: int | None = None
    """An NVLink bridge joins this many cards; a job on more of them crosses PCIe (``PCIE5``) between groups."""


def _model(pattern: str, link: Link, bridge_gpus: int | None = None) -> _Model:
    return _Model(re.compile(pattern), link, bridge_gpus)


# First match wins, so the PCIe and NVL cards of a model come before its SXM module. A PCIe card may carry an NVLink
# bridge its name does not show: NVML's active links tell (``measured_link``); from the name alone it is PCIe.
# H100 NVL: NVLink bridge between 2 cards, 600 GB/s bidirectional; H200 NVL: 2- or 4-way bridge, 900 GB/s
# (NVIDIA's H100 and H200 NVL product briefs).
_LINKS: tuple[_Model, ...] = (
    _model(r"\bB200\b", Link("NVLink 5", 900.0)),
    _model(r"\bH200\b.*\bNVL\b", Link("NVLink bridge", 450.0), bridge_gpus=4),
    _model(r"\bH100\b.*\bNVL\b", Link("NVLink bridge", 300.0), bridge_gpus=2),
    _model(r"\bH[12]00\b.*\bPCIE\b", PCIE5),
    _model(r"\bH[12]00\b", Link("NVLink 4", 450.0)),
    _model(r"\bA100\b.*\bPCIE\b", PCIE4),
    _model(r"\bA100\b", Link("NVLink 3", 300.0)),
    _model(r"\bV100\b.*\bSXM", Link("NVLink 2", 150.0)),
    _model(r"\bV100\b.*\bDGXS\b", Link("NVLink 2", 100.0)),
    _model(r"\bV100\b", PCIE3),
    _model(r"\bMI300X\b", Link("Infinity Fabric", 448.0)),
    _model(r"\bL40S?\b|\bL4\b|\bA10G?\b", PCIE4),
    _model(r"\bT4\b", PCIE3),
)


NVLINK_VERSIONS: dict[int, str] = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}
"""NVML's ``nvmlNvlinkVersion_t`` codes (what ``nvmlDeviceGetNvLinkVersion`` returns: NVML_NVLINK_VERSION_1_0 = 1,
2_0 = 2, 2_2 = 3, 3_0 = 4, 3_1 = 5, 4_0 = 6, 5_0 = 7, 6_0 = 8; 0 is INVALID) -> the NVLink version. A code is not
a version: an H100 (NVLink 4.0) answers 6."""
NVLINK_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
"""Per link and direction, by NVLink major version (NVLink 1 on P100: 20 GB/s; 2-4 on V100, A100, H100: 25 GB/s;
5 on B200: 50 GB/s; x4, x6, x12, x18, x18 links give the datasheets' 80, 150, 300, 450, 900 GB/s per direction).
NVLink 2.2 and 3.1 carry what 2 and 3 do. NVLink 6's per-link figure is not in the table: unknown, not guessed."""
PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
"""Per lane and direction, after line coding (PCI-SIG)."""


def nvlink_version(code: int | None) -> str | None:
    """The NVLink version ("4.0") of an NVML version code (6); None for INVALID or a code the table lacks."""
    return NVLINK_VERSIONS.get(code) if code is not None else None


def nvlink_gbps_per_link(code: int | None) -> float | None:
    """GB/s per link and direction of an NVML version code; None when the version or its speed is unknown."""
    version = nvlink_version(code)
    return NVLINK_GBPS_PER_LINK.get(int(version.split(".")[0])) if version is not None else None


def measured_link(gpu: GpuInfo) -> Link | None:
    """The link a live run's GPU reported through NVML: its active NVLink links, else its PCIe generation and
    width; None when NVML told neither, or told of NVLink links of a speed the table lacks (the PCIe figure
    would understate them: the model table is the better guess then). A GPU on which every NVLink call is
    NotSupported (a PCIe card) has 0 links, and is judged by its PCIe link."""
    if gpu.nvlink_links:
        per_link = nvlink_gbps_per_link(gpu.nvlink_version)
        if per_link is None:
            return None
        return Link(f"NVLink {nvlink_version(gpu.nvlink_version)} x{gpu.nvlink_links}", gpu.nvlink_links * per_link)
    return pcie_link(gpu)


def pcie_link(gpu: GpuInfo) -> Link | None:
    """The GPU's current PCIe link (generation and width, per direction); None when NVML did not tell them."""
    if gpu.pcie_gen in PCIE_GBPS_PER_LANE and gpu.pcie_width:
        return Link(f"PCIe {gpu.pcie_gen}.0 x{gpu.pcie_width}", PCIE_GBPS_PER_LANE[gpu.pcie_gen] * gpu.pcie_width)
    return None


def link_of(model: str | None, gpus: int | None = None) -> Link | None:
    """The fastest link every pair of a job's ``gpus`` GPUs of this model has; None for a model not in the table.

    Cards joined by NVLink bridges in pairs (H100 NVL) or fours (H200 NVL) have it only inside a bridge: a job on
    more of them (or an unknown number) is bounded by PCIe between the groups."""
    if not model:
        return None
    upper = " ".join(re.split(r"[\s\-_/]+", model.upper()))
    found = next((m for m in _LINKS if m.pattern.search(upper)), None)
    if found is None:
        return None
    if found.bridge_gpus is not None and (gpus is None or gpus > found.bridge_gpus):
        return PCIE5
    return found.link


def has_nvlink(model: str | None) -> bool | None:
    """Whether a GPU model has NVLink (an SXM module, or an NVL card's bridge) by its name: False for a PCIe card
    (A100 PCIe, H100 PCIe, L4, ...), None for a model not in the table."""
    link = link_of(model, 2)
    return None if link is None else link.name.startswith("NVLink")
