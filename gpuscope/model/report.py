"""The analysis report: the one object behind every view (terminal, JSON, dashboard, gates).

Field names and meanings are stable (schema ``gpuscope.report/1``); fields may be added. Times are
microseconds where the name says ``_us``; shares are fractions 0..1; a value that cannot be
known is None (JSON null), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpuscope.model.profile import RankProfile
from gpuscope.model.schema import ProcessRole

SCHEMA = "gpuscope.report/1"

Stage = Literal["data_loading", "host_overhead", "communication", "memory", "gpu_compute", "idle"]
Resource = Literal["io", "cpu", "memory", "nccl", "gpu", "unknown"]
Severity = Literal["info", "warning", "critical"]
Workload = Literal["training", "inference"]

STAGES: tuple[Stage, ...] = ("data_loading", "host_overhead", "communication", "memory", "gpu_compute", "idle")


@dataclass(frozen=True)
class StepBreakdown:
    """Step time split the way the PyTorch profiler's TensorBoard plugin splits it, in µs.

    Each category holds only time no higher-priority category claimed
    (kernel > memcpy > memset > communication > runtime > dataloader > cpu_exec > other),
    so the parts add up to the step time.
    """

    kernel: float = 0.0
    memcpy: float = 0.0
    memset: float = 0.0
    communication: float = 0.0
    runtime: float = 0.0
    dataloader: float = 0.0
    cpu_exec: float = 0.0
    other: float = 0.0

    @property
    def total(self) -> float:
        return (self.kernel + self.memcpy + self.memset + self.communication + self.runtime
                + self.dataloader + self.cpu_exec + self.other)


@dataclass(frozen=True)
class StepRecord:
    """One profiler step as analysed (its span reaches the end of the GPU work it launched)."""

    name: str
    start_us: float
    """Relative to the rank's window start."""
    duration_us: float
    breakdown_us: StepBreakdown
    gpu_busy: float | None
    warmup: bool = False
    """True for a step inside the start-up or warm-up at the trace's beginning (lazy CUDA initialisation,
    torch.compile compilation, CUDA-graph capture): the verdict, cost shares and gates use the other steps."""


@dataclass(frozen=True)
class Temporal:
    """Holistic Trace Analysis' temporal breakdown over the rank's window, in µs."""

    idle_us: float
    compute_us: float
    non_compute_us: float


@dataclass(frozen=True)
class IdleBreakdown:
    """GPU idle time split by cause (HTA's rules, over the rank's whole window), in µs."""

    host_wait: float
    """The GPU waited for the host to launch work."""
    kernel_wait: float
    """Short gaps (< 30 µs) between back-to-back kernels."""
    other: float


@dataclass(frozen=True)
class CollectiveStat:
    """Collectives of one op and message-size bucket on a rank, with nccl-tests' bandwidths."""

    op: str
    """all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, send or recv."""
    size_bucket: str
    group_size: int | None
    count: int
    bytes: int
    """Message bytes summed over the ops (nccl-tests' size S for each)."""
    time_us: float
    """Time in the NCCL kernels these ops launched."""
    algbw_gbps: float
    """bytes / time, GB/s (1e9 bytes per second)."""
    busbw_gbps: float | None
    """algbw x the op's bus factor for the group size; None when the group size is unknown."""


@dataclass(frozen=True)
class Communication:
    """Collective communication on the rank, in µs."""

    total_us: float
    exposed_us: float
    """Communication not overlapped by compute kernels: time the step waits on it."""
    overlap: float | None
    """Share of communication time overlapped by compute; None when there is none."""
    kernels: int = 0
    collectives: tuple[CollectiveStat, ...] = ()
    """Per op and size bucket, where the trace recorded message sizes (PyTorch 2.x comms args)."""


@dataclass(frozen=True)
class Memory:
    """Device memory: peak allocated from ``[memory]`` events against the device's memory."""

    peak_allocated_bytes: int | None
    device_bytes: int | None
    peak_share: float | None = None
    """peak_allocated_bytes / device_bytes when both are known."""
    lower_bound: bool = False
    """The trace predates "Total Allocated": the peak is a running sum of the allocations it saw, so at least
    this much (memory allocated before the trace began is missing)."""


@dataclass(frozen=True)
class LaunchStats:
    """Kernel launches: how long kernels wait after their launch call, and how tiny they are."""

    kernels: int
    launch_delay_median_us: float | None
    launch_delay_p95_us: float | None
    short_kernel_share: float | None
    """Share of kernels shorter than ``short_kernel_us``."""
    short_kernel_us: float = 10.0
    kernel_median_us: float | None = None
    sync_calls: int = 0
    """cudaDeviceSynchronize / cudaStreamSynchronize / cudaMemcpy (synchronous) calls."""
    sync_us: float = 0.0
    pageable_memcpy: int = 0
    """Host-device copies from pageable memory (Nsight Systems flags these)."""
    pageable_memcpy_us: float = 0.0


@dataclass(frozen=True)
class KernelStat:
    """One kernel name's total on the rank."""

    name: str
    count: int
    total_us: float
    mean_us: float
    share: float
    """Share of all kernel time on the rank."""
    category: Literal["compute", "communication", "memory"] = "compute"
    tensor_core: bool | None = None


@dataclass(frozen=True)
class Startup:
    """One-time start-up inside a rank's trace (lazy CUDA/HIP initialisation, torch.compile, CUDA-graph capture)."""

    duration_us: float
    """Start-up time inside the window (kinds that overlap counted once)."""
    parts_us: dict[str, float] = field(default_factory=dict)
    """Time by kind: "CUDA/HIP initialisation", "CUDA-graph capture", "torch.compile compilation"."""
    calls: tuple[str, ...] = ()
    """The initialising runtime calls seen, most time first."""
    warmup_steps: int = 0
    """Profiler steps marked warm-up (``StepRecord.warmup``) and left out of the step figures."""
    steady: bool = True
    """False when the window holds start-up only: nothing in it shows the job's steady state."""


@dataclass(frozen=True)
class DeviceBusy:
    """One GPU a rank's process ran work on."""

    device: int
    busy: float | None
    """|union of this device's kernel, memcpy and memset intervals| / the steady window."""
    model: str | None = None


@dataclass(frozen=True)
class RankReport:
    """What one rank's trace says. Step figures are means over its steady profiler steps (warm-up steps left
    out); ``gpu_busy`` and the step breakdown cover the steady window; HTA's temporal and idle breakdowns the
    whole window."""

    rank: int
    window_us: float
    steps: int
    """Profiler steps analysed (0 when the trace has no ProfilerStep: then no step is invented)."""
    step_time_us: float | None
    """Mean steady step; None without profiler steps."""
    gpu_busy: float | None
    """|union of kernel, memcpy and memset intervals| / steady window, the mean over the rank's devices when
    it drove several; None on a CPU-only trace."""
    step_breakdown_us: StepBreakdown
    temporal: Temporal | None
    idle_breakdown_us: IdleBreakdown | None
    communication: Communication
    memory: Memory
    launch: LaunchStats | None = None
    top_kernels: tuple[KernelStat, ...] = ()
    per_step: tuple[StepRecord, ...] = ()
    kernel_utilization: float | None = None
    """The TensorBoard plugin's "GPU Utilization": kernels only, over the steps window."""
    sm_efficiency: float | None = None
    """Est. SM efficiency (the plugin's definition); None when the trace lacks blocks per SM."""
    device: str | None = None
    source: str | None = None
    devices: tuple[DeviceBusy, ...] = ()
    """The GPUs this rank's process ran work on (one GPU per rank in most jobs)."""
    startup: Startup | None = None
    steady_window_us: float | None = None
    """The window less leading warm-up: what the step figures and ``gpu_busy`` cover."""
    workload: Workload | None = None
    """"training" (backward and optimizer ran) or "inference" (forward only, or a serving framework); None when
    the trace cannot tell (no host ops and no backward kernels)."""
    workload_evidence: str = ""
    """The event that decided ``workload``."""
    world_size: int | None = None
    """The job's number of ranks as the trace's ``distributedInfo`` states it; None when it does not say."""
    clock_skew_us: float | None = None
    """Median by which GPU work started before the host call that launched it, when many kernels do: the host
    and GPU clocks disagree and host-GPU attribution (launch delay, host-wait idle) is left out."""
    profile: RankProfile | None = None
    """Kernels and operators of the steady steps by name, and the set-up the trace records: what
    ``gpuscope diff`` compares. None in reports saved before it existed."""

    @property
    def span_us(self) -> float:
        """What the step breakdown covers: the mean steady step, or without profiler steps the steady window."""
        if self.step_time_us is not None:
            return self.step_time_us
        return self.steady_window_us if self.steady_window_us is not None else self.window_us

    @property
    def gpu_count(self) -> int:
        return max(len(self.devices), 1)


@dataclass(frozen=True)
class JobFacts:
    """The job-level numbers more than one rule or view uses, each computed once with one stated statistic
    (``gpuscope.analyzers.diagnosis.facts.DEFINITIONS``): every rule, the cost, the gate and every view read these.
    None where the run cannot tell."""

    step_time_us: float | None = None
    """Mean over the steady steps of the job's step: a step ends when its slowest rank's does."""
    steady_steps: int = 0
    """The steady job steps behind ``step_time_us`` (warm-up steps left out)."""
    ranks: int = 0
    """Ranks (traces) the facts cover; 0 for a live run without traces."""
    gpu_busy: float | None = None
    """Share of the job's GPU time with GPU work running: the ranks' busy weighted by their GPU time (traces), else
    the live busy share averaged over the run's GPUs (``GpuLive.busy_mean``: NVML's utilization.gpu, the job's own
    SM share on a GPU it shared, DCGM's GR engine active on a MIG slice)."""
    gpu_busy_source: Literal["trace", "nvml", "dcgm"] | None = None
    peak_memory_share: float | None = None
    """The worst rank's (or GPU's) peak memory over its device memory: the figure every headroom decision uses."""
    peak_memory_bytes: int | None = None
    device_memory_bytes: int | None = None
    peak_memory_rank: int | None = None
    """The rank (trace) or GPU index (live) with that peak."""
    peak_memory_lower_bound: bool = False
    """The worst peak is only a lower bound (a trace without "Total Allocated")."""
    peak_memory_all_known: bool = False
    """Every rank's (or GPU's) peak is known exactly: only then is the worst peak the job's peak (right-sizing)."""
    data_wait_share: float | None = None
    """The data_loading stage share: the time the GPU waits for input, over the step."""
    exposed_comm_share: float | None = None
    """The communication stage share: collectives no computation hides, over the step."""


@dataclass(frozen=True)
class Finding:
    """One thing the analysis noticed, with the numbers behind it."""

    code: str
    """Stable: gates and tests key on it (e.g. "dataloader_share_high")."""
    severity: Severity
    title: str
    evidence: dict[str, float | int | str | None] = field(default_factory=dict)
    """Metric name (with its unit in the name) -> value."""
    time_share: float | None = None
    """Share of step (or run) time this finding concerns, 0..1."""
    recommendations: tuple[str, ...] = ()
    stage: Stage | None = None
    rank: int | None = None


@dataclass(frozen=True)
class Verdict:
    """What held the GPUs back, in the user's words."""

    primary: Stage | None
    resource: Resource
    secondary: tuple[Stage, ...] = ()
    confidence: float = 0.0
    evidence: dict[str, float | int | str | None] = field(default_factory=dict)
    summary: str = ""
    """One sentence a newcomer can read."""


@dataclass(frozen=True)
class Recommendation:
    """What to change, concretely, and what it should save."""

    code: str
    title: str
    detail: str
    est_step_saving: float | None
    """Expected fraction of step time saved, 0..1."""
    reasoning: str = ""
    """How est_step_saving was derived."""
    est_saving_usd: float | None = None
    stage: Stage | None = None


@dataclass(frozen=True)
class WasteSplit:
    """Wasted dollars by cause. None where the cost is unknown."""

    idle: float | None = None
    data_loading: float | None = None
    host_overhead: float | None = None
    communication: float | None = None
    memory: float | None = None
    unattributed: float | None = None
    """GPU time not busy whose cause was not measured (a live run without stack samples, say)."""


@dataclass(frozen=True)
class CostReport:
    """What the GPUs cost and how much of it bought nothing."""

    gpu_hours: float
    usd_per_gpu_hour: float | None
    price_source: str | None
    total_usd: float | None
    wasted_usd: float | None
    waste_by_cause_usd: WasteSplit = field(default_factory=WasteSplit)
    energy_kwh: float | None = None
    co2_kg: float | None = None
    per_step_usd: float | None = None
    per_1k_steps_usd: float | None = None
    per_1k_samples_usd: float | None = None
    projected_usd: float | None = None
    note: str | None = None
    """E.g. how to set a price for an unknown GPU."""
    gpu_count: int | None = None
    """GPUs charged: one per rank of a trace, the GPUs the target used in a live run."""
    waste_basis: str | None = None
    """What the waste split was derived from ("step_breakdown" for traces, "gpu_utilization" for live runs)."""
    projection_basis: str | None = None
    """"job_hours" or "job_steps": what ``projected_usd`` scales."""
    projected_wasted_usd: float | None = None
    energy_source: str | None = None
    """"energy_counter" (NVML's counter, differenced) or "power_integral" (power samples integrated)."""
    grid_kg_co2_per_kwh: float | None = None
    grid_source: str | None = None
    gpu_share: float | None = None
    """Where the run's GPUs are MIG instances: the share of their parent GPU's price each GPU-hour is charged
    (``usd_per_gpu_hour = gpu_share x whole_usd_per_gpu_hour``); None for whole GPUs."""
    whole_usd_per_gpu_hour: float | None = None
    gpu_share_basis: str | None = None
    """How ``gpu_share`` was reached ("MIG 1g.10gb: 1 of the H100 SXM 80GB's 7 compute slices")."""
    held_usd: float | None = None
    """Where the target shared a GPU with other processes: the whole GPUs' cost while it held them (null when it
    had its GPUs to itself)."""
    own_usd: float | None = None
    """Its part of ``held_usd``, by ``live.shares[].cost_part`` (its measured use, else an equal part)."""
    own_basis: str | None = None
    """"measured", "even" or "mixed": how ``own_usd`` was split."""
    neighbours_usd: float | None = None
    """The part of ``held_usd`` that bought other processes' kernels (their SM share x the held cost): what the
    contention cost while the target waited its turn on a time-sliced GPU."""


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


@dataclass(frozen=True)
class GpuSummary:
    model: str | None
    memory_bytes: int | None
    index: int | None = None
    mig_profile: str | None = None
    """The MIG instance's profile ("1g.10gb") when the GPU is one; ``model`` is then its parent's."""


@dataclass(frozen=True)
class RunSummary:
    id: str
    kind: str
    name: str = ""
    status: str = ""
    started_ns: int | None = None
    duration_s: float | None = None
    gpus: tuple[GpuSummary, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    """The run's tags: for a live run in a container, ``container.id``, ``container.runtime``, ``pod.uid``,
    ``pod.name``, ``pod.namespace`` (``collectors.container``) where its cgroup and environment tell them."""


@dataclass(frozen=True, kw_only=True)
class Report:
    """The whole analysis of one run (``gpuscope analyze --json`` prints it)."""

    schema: str = SCHEMA
    run: RunSummary
    ranks: tuple[RankReport, ...]
    verdict: Verdict
    findings: tuple[Finding, ...] = ()
    recommendations: tuple[Recommendation, ...] = ()
    cost: CostReport | None = None
    live: LiveSummary | None = None
    warnings: tuple[str, ...] = ()
    """What could not be read or analysed (a bad rank file, say), one line each."""
    unread_rank_files: tuple[str, ...] = ()
    """Trace files of the run that could not be read ("path: why"): ranks missing from ``ranks``. A JSON file that
    is no profiler trace at all (no ``traceEvents``) is no rank, and only a warning."""
    stage_shares: dict[Stage, float | None] = field(default_factory=dict)
    """Share of the job's (steady-state) step each stage accounts for, 0..1, keyed by stage code: the one set of
    numbers behind the verdict, the cost's waste by cause and every view. None where nothing could tell."""
    facts: JobFacts | None = None
    """The job-level figures every rule and view quotes (step time, GPU busy, peak memory, ...), computed once.
    None only in reports saved before they existed (``gpuscope.analyzers.diagnosis.facts.facts_of`` recomputes)."""
