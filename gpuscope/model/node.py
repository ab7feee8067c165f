"""What `gpuscope top` shows: this node's GPUs and GPU processes at one moment, and the cost so far.

A value the driver or /proc does not give is None (shown "n/a"), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuNow:
    """One GPU (or MIG instance) now."""

    index: int
    """NVML's index (a MIG instance: ``schema.mig_gpu``)."""
    name: str | None
    uuid: str | None = None
    mig_profile: str | None = None
    util: float | None = None
    """Share of the last sample period a kernel ran (``utilization.gpu`` / 100)."""
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    usd_per_hour: float | None = None
    """Its price per hour (a MIG instance: its share of the GPU's); None when unknown."""
    price_source: str | None = None


@dataclass(frozen=True)
class ProcessNow:
    """One compute process on one GPU now."""

    gpu: int
    pid: int
    user: str | None = None
    command: tuple[str, ...] = ()
    """The command line's words, as /proc gives them (the process's own: untrusted); empty where unreadable."""
    container: dict[str, str] = field(default_factory=dict)
    """Its container and pod as a run's tags (``container.id``, ``pod.name`` ...) where its cgroup tells; empty
    outside a container."""
    memory_bytes: float | None = None
    sm_share: float | None = None
    """Its share of the GPU's SMs since the previous frame (``nvidia-smi pmon`` sm / 100); None where the
    driver gives none."""


@dataclass(frozen=True)
class NodeSnapshot:
    """Every GPU and GPU process of the node at ``ts_ns``."""

    ts_ns: int
    host: str
    gpus: tuple[GpuNow, ...]
    processes: tuple[ProcessNow, ...]
    problem: str | None = None
    """One line when processes cannot be listed here (another PID namespace without the host's /proc)."""


@dataclass(frozen=True)
class RunningCost:
    """What the GPUs and the processes on them have cost since `top` started (USD)."""

    since_ns: int
    until_ns: int
    gpu_usd: dict[int, float] = field(default_factory=dict)
    """GPU index -> its cost so far; a GPU without a price is absent."""
    process_usd: dict[tuple[int, int], float] = field(default_factory=dict)
    """(GPU, pid) -> its part of the GPU's cost so far."""
    process_usd_per_hour: dict[tuple[int, int], float] = field(default_factory=dict)
    """(GPU, pid) -> its part of the GPU's price over the last frame, per hour."""
    total_usd: float | None = None
    """Every priced GPU together (a GPU in MIG mode once, as a whole, not again through its instances)."""
