"""Where a job's GPUs sit on the machine's PCIe tree, from the paths NVML reported between them (live runs).

Without NVLink, GPUs under PCIe switches exchange collectives peer to peer (NCCL's P2P transport: its default
cut-off is PXB, through switches only, on most CPUs); GPUs that meet only at the CPU's host bridge, across host
bridges, or across CPU sockets get NCCL's shared-memory transport instead, through a staging buffer in host memory,
unless ``NCCL_P2P_LEVEL`` allows P2P that far. NVML's common ancestor of two GPUs (``nvidia-smi topo -m``) names
that path.

NVML gives the path from each of the job's GPUs to every GPU of the machine, not between two GPUs outside the job;
a PCIe tree is a tree, so two GPUs that each share a switch with a third share one with each other (the common
ancestor of a and b is no higher than the higher of a's and b's with c), which is what finding a closer set relies on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from gpuscope.analyzers.diagnosis.links import has_nvlink
from gpuscope.model.gpu import GpuInfo

PATHS = ("same_board", "pcie_switch", "pcie_switches", "host_bridge", "cpu_socket", "across_sockets")
"""NVML's common-ancestor levels in gpuscope's words, nearest first (NVML_TOPOLOGY_INTERNAL, SINGLE, MULTIPLE,
HOSTBRIDGE, NODE, SYSTEM; nvidia-smi's PIX, PXB, PHB, NODE, SYS)."""
NEAR = frozenset(PATHS[:3])
"""Peer to peer by NCCL's default: on one board or through PCIe switches only."""
WORDS = {"host_bridge": "through the CPU's PCIe host bridge", "cpu_socket": "across PCIe host bridges of one CPU",
         "across_sockets": "across CPU sockets"}
P2P_LEVEL = {"host_bridge": "PHB", "cpu_socket": "PHB", "across_sockets": "SYS"}
"""The NCCL_P2P_LEVEL that allows P2P over each far path (PHB: within a NUMA node, through the CPU; SYS: across
the SMP interconnect)."""


@dataclass(frozen=True)
class Placement:
    """A job whose GPUs talk over a far path, and GPUs of the same machine that would not."""

    gpus: tuple[int, ...]
    """The job's GPU indices."""
    path: str
    """The farthest path between two of them (one of ``WORDS``)."""
    pair: tuple[int, int]
    """Two of the job's GPUs on that path."""
    closer: tuple[int, ...] | None
    """As many GPUs of the machine, pairwise under PCIe switches only; None when the machine has no such set."""


def placement(gpus: Sequence[GpuInfo]) -> Placement | None:
    """The job's placement when two of its GPUs talk over a far path and none of them has NVLink; None when the
    job has one GPU, any GPU has active NVLink links, or did not say and is not a PCIe card by its name (NVLink may
    carry its P2P whatever the PCIe path), or NVML told no path between the job's GPUs."""
    if len(gpus) < 2 or any(_may_have_nvlink(g) for g in gpus):
        return None
    paths = {(g.index, other): path for g in gpus for other, path in g.peers if path in PATHS}
    known = [(paths.get((a.index, b.index)) or paths.get((b.index, a.index)), a.index, b.index)
             for a, b in combinations(gpus, 2)]
    pairs = [(PATHS.index(path), a, b) for path, a, b in known if path is not None]
    if not pairs:
        return None
    level, a, b = max(pairs)
    if PATHS[level] in NEAR:
        return None
    job = tuple(sorted(g.index for g in gpus))
    return Placement(gpus=job, path=PATHS[level], pair=(a, b), closer=_closer_set(gpus, job))


def _may_have_nvlink(gpu: GpuInfo) -> bool:
    if gpu.nvlink_links is not None:
        return gpu.nvlink_links != 0
    return has_nvlink(gpu.name) is not False


def _closer_set(gpus: Sequence[GpuInfo], job: tuple[int, ...]) -> tuple[int, ...] | None:
    """``len(job)`` GPUs around one of the job's GPUs, each under PCIe switches only from it (so from each other):
    the set keeping most of the job's GPUs, then the nearest, then the lowest indices."""
    best: tuple[tuple[int, int, tuple[int, ...]], tuple[int, ...]] | None = None
    for anchor in gpus:
        near = sorted((PATHS.index(path), other) for other, path in anchor.peers if path in NEAR)
        if len(near) + 1 < len(job):
            continue
        ranked = sorted(near, key=lambda lv: (lv[1] not in job, lv[0], lv[1]))[:len(job) - 1]
        chosen = tuple(sorted({anchor.index, *(other for _, other in ranked)}))
        key = (-len(set(chosen) & set(job)), max(lv for lv, _ in ranked), chosen)
        if best is None or key < best[0]:
            best = (key, chosen)
    return best[1] if best is not None else None
