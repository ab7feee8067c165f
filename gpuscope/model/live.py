"""What live sampling saw, summarised: per GPU, the target's share of a GPU it shared, its process tree on the host,
and where its threads spent their time.

Part of the report (schema ``gpuscope.report/1``, field names stable); times are microseconds where the name says
``_us``, shares fractions 0..1, and what cannot be known is None (JSON null), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuscope.model.schema import ProcessRole


@dataclass(frozen=True)
class CounterStop:
    """A counter that stopped answering mid-run: its samples end at ``at_ns``, and it is unknown after (never 0)."""

    counter: str
    """The collector's name for it ("power", "utilization", "temperature", ...); "gpu": every counter of the GPU."""
    reason: str
    """"not_supported" (the driver stopped supporting it), "gpu_lost" (the GPU fell off the bus) or "failing"
    (its reads kept failing: unknown errors, timeouts)."""
    at_ns: int
    after_s: float | None = None
    """Seconds into the run."""


@dataclass(frozen=True)
class GpuLive:
    """Live samples of one GPU over a run, summarised. None where the device never reported it."""

    gpu: int
    samples: int
    util_mean: float | None = None
    """NVML utilization.gpu as a fraction: share of time a kernel ran (not SM occupancy)."""
    sm_active_mean: float | None = None
    """DCGM PROF_SM_ACTIVE, 0..1."""
    tensor_active_mean: float | None = None
    """DCGM PROF_PIPE_TENSOR_ACTIVE, 0..1: the tensor pipes' busy share (``analyzers.efficiency.pipes`` reads it
    beside SM active, as the fleet does)."""
    dram_active_mean: float | None = None
    memory_used_peak_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_mean_w: float | None = None
    energy_j: float | None = None
    idle_share: float | None = None
    """Share of samples in which the GPU was busy under 5% (``busy_source``'s measure)."""
    throttle_reasons: tuple[str, ...] = ()
    gr_engine_active_mean: float | None = None
    """DCGM PROF_GR_ENGINE_ACTIVE, 0..1: the busy share of a MIG instance, where NVML has no utilization."""
    busy_mean: float | None = None
    """The busy share the diagnosis and the cost read: the target's own SM share on a GPU it shared with other
    processes (``busy_source`` "own_sm"), else utilization ("util"), else GR engine active ("gr_engine_active")."""
    busy_source: Literal["own_sm", "util", "gr_engine_active"] | None = None
    stopped: tuple[CounterStop, ...] = ()
    """Counters that stopped answering during the run, in the order they stopped."""
    sm_occupancy_mean: float | None = None
    """DCGM PROF_SM_OCCUPANCY, 0..1: resident warps over the most an SM can hold."""

    def __post_init__(self) -> None:
        # Left out (a summary built by hand, a report saved before the field existed): the GPU's own measures.
        if self.busy_mean is None and self.busy_source is None:
            for value, source in ((self.util_mean, "util"), (self.gr_engine_active_mean, "gr_engine_active")):
                if value is not None:
                    object.__setattr__(self, "busy_mean", value)
                    object.__setattr__(self, "busy_source", source)
                    return


@dataclass(frozen=True)
class GpuShare:
    """The target's own part of one GPU it held, beside the GPU's whole: for a GPU shared with other processes
    (time-slicing, MPS, or just two jobs), what its job used and what its part of the GPU's cost is.
    ``analyzers.sharing`` says how each figure is measured; unknown stays None."""

    gpu: int
    held_s: float
    """How long the target held a context on the GPU (the run's duration x its share of the GPU's ticks)."""
    shared: bool
    """Another process held a context on the GPU at some tick the target did."""
    own_sm_mean: float | None = None
    """The target's SM share (NVML per-process utilization, its processes summed), mean over the ticks it held
    the GPU and NVML answered."""
    own_mem_util_mean: float | None = None
    """Its share of the memory read/write time, likewise."""
    others_sm_mean: float | None = None
    """The other processes' SM shares together, over the same ticks."""
    gpu_busy_mean: float | None = None
    """The GPU's utilization (all processes) over the ticks the target held it."""
    own_idle_share: float | None = None
    """Share of those ticks in which the target's own SM share was under 5%."""
    own_memory_peak_bytes: int | None = None
    memory_total_bytes: int | None = None
    other_processes_max: int | None = None
    cost_part: float | None = None
    """The target's part of the GPU's cost while it held it, 0..1: per tick its SM use over all processes' use
    where NVML measured both, else an equal part per process; the mean over the ticks it held the GPU."""
    cost_basis: Literal["measured", "even", "mixed"] | None = None
    """How ``cost_part`` was split on the ticks the GPU was shared; None when it never was."""


@dataclass(frozen=True)
class HostLive:
    """The target's process tree on the host, summarised."""

    main_cpu_mean: float | None = None
    """CPU of the main process in cores (1.0 = one core busy)."""
    workers: int = 0
    """DataLoader worker (child) processes seen."""
    workers_cpu_mean: float | None = None
    """Mean CPU of the workers together, in cores."""
    iowait_mean: float | None = None
    """Machine-wide share of CPU time spent waiting on storage (psutil ``iowait``), 0..1."""
    read_bytes_per_s: float | None = None
    """Storage reads of the whole tree (main + workers) per second, mean over ticks; page-cache hits excluded."""
    rss_peak_bytes: int | None = None
    """Peak over ticks of the tree's summed RSS (pages forked workers share count once per process)."""
    cpu_count: int | None = None
    """Cores gpuscope's host may use, to judge ``workers_cpu_mean`` against (workers_cpu_mean / cpu_count)."""
    host_cpu_mean: float | None = None
    """Machine-wide CPU busy share, 0..1."""
    read_chars_per_s: float | None = None
    """Every byte the tree read per second (files from page cache, sockets, pipes included), mean over ticks."""
    disk_wait_threads_mean: float | None = None
    """Mean number of the tree's threads in disk wait (kernel state ``D``) per tick."""
    workers_per_tick_mean: float | None = None
    """Mean number of live worker processes per tick (``workers`` counts every one ever seen)."""
    trainers: int | None = None
    """Training processes (ranks) seen; ``main_cpu_mean`` is their mean. None in runs recorded without roles."""
    helpers: int = 0
    """Other children of the trainers (a logging service, compile workers, a subprocess): never workers."""
    helpers_cpu_mean: float | None = None
    """Mean CPU of the helpers together, in cores."""


@dataclass(frozen=True)
class StackLive:
    """Where the target's threads spent their time, from py-spy stack samples (shares 0..1).

    ``main_*`` are shares of the main thread's samples and sum to 1 (None when it was never sampled);
    samples taken while the process imports modules (start-up) are left out of them and counted in
    ``main_startup_samples``.
    ``workers_*`` are shares of DataLoader worker samples and sum to 1; with no worker processes
    (``num_workers=0``), of the trainers' main-thread samples that load in-process (None without either).
    The rules that sort a sample are ``gpuscope.analyzers.stacks.classify_main``/``classify_worker``.
    """

    samples: int
    """Stack samples of all threads of all processes."""
    main_dataloader_wait: float | None = None
    """Inside ``torch.utils.data`` (the DataLoader's ``__next__``): waiting on workers or loading in-process."""
    main_sync: float | None = None
    """In a host-device sync: ``.item()``, ``.cpu()``, ``.to()``, ``torch.cuda.synchronize()``."""
    main_nccl_wait: float | None = None
    """Inside a ``torch.distributed`` collective or its wait."""
    main_launch: float | None = None
    """Inside other torch code (forward, backward, optimizer step): launching device work."""
    main_python: float | None = None
    """On CPU in code outside torch."""
    main_idle: float | None = None
    """Off CPU outside torch (sleeping, waiting on a lock or a socket)."""
    workers_on_cpu: float | None = None
    """Worker samples on CPU: decoding, augmenting, collating (a CPU-bound loader)."""
    workers_io: float | None = None
    """Worker samples blocked while fetching a batch (reads, network, disk wait): an I/O-bound loader."""
    top_stack: tuple[str, ...] = ()
    """The main thread's most frequent stack, outermost frame first."""
    main_samples: int = 0
    """Main-thread samples the ``main_*`` shares are taken over (start-up excluded)."""
    main_startup_samples: int = 0
    """Main-thread samples taken while the process imported modules."""
    worker_samples: int = 0
    workers_idle: float | None = None
    """Worker samples waiting for work (their batches are ready before the training loop asks)."""


@dataclass(frozen=True)
class LiveProcess:
    """One process of a live run's tree: its role (``gpuscope.collectors.roles``) and what it used."""

    pid: int
    role: ProcessRole
    rank: int | None = None
    """The rank its environment names (RANK, OMPI_COMM_WORLD_RANK, ...), for a trainer."""
    gpu: int | None = None
    """The GPU it held the most memory on (NVML index), for a process holding a GPU context."""
    cpu_mean: float | None = None
    """Mean CPU in cores over the ticks it was seen."""


@dataclass(frozen=True)
class LiveSummary:
    """What live sampling saw: the evidence only a running process can give."""

    duration_s: float
    gpus: tuple[GpuLive, ...] = ()
    host: HostLive | None = None
    stacks: StackLive | None = None
    sources: tuple[str, ...] = ()
    """Which collectors produced data, e.g. ("nvml", "host", "stacks")."""
    processes: tuple[LiveProcess, ...] = ()
    """The tree's processes by role, trainers first (by rank); launchers, workers and helpers after."""
    shares: tuple[GpuShare, ...] = ()
    """Per GPU the target held a context on (NVML's process list): its own part of it beside the whole."""
