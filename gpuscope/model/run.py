"""What a run is: its catalog entry, the GPUs it used, and the data recorded into it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pandas as pd

    from gpuscope.model.trace import RankTrace

RunKind = Literal["attach", "run", "trace", "fleet"]
RunStatus = Literal["running", "complete", "target_exited", "interrupted", "failed"]


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


@dataclass(frozen=True)
class RunMeta:
    """A run's catalog entry in the store."""

    id: str
    name: str
    kind: RunKind
    status: RunStatus
    started_ns: int
    ended_ns: int | None = None
    host: str | None = None
    command: tuple[str, ...] = ()
    pid: int | None = None
    gpus: tuple[GpuInfo, ...] = ()
    price_source: str | None = None
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int | None:
        return None if self.ended_ns is None else self.ended_ns - self.started_ns


@dataclass(frozen=True)
class StackSamples:
    """py-spy stack samples of a run, in long form.

    ``samples`` columns: ts_ns, pid, tid, state ("active" | "idle" | "gil" ...), stack_id.
    ``stacks`` maps stack_id to its frames, outermost first, each "function (file:line)".
    """

    samples: pd.DataFrame
    stacks: dict[int, tuple[str, ...]]


@dataclass(frozen=True)
class Run:
    """Everything recorded for one run: what every analyzer takes as its only input."""

    meta: RunMeta
    traces: tuple[RankTrace, ...] = ()
    samples: pd.DataFrame | None = None
    """Long format: ts_ns, source, gpu, pid, metric, value (see model.schema). A counter
    a device cannot report is a missing row, never a 0."""
    stacks: StackSamples | None = None
