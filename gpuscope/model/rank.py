"""What one rank's trace says: its steps and their breakdown, communication, memory, launches and kernels.

Part of the report (schema ``gpuscope.report/1``, field names stable); times are microseconds where the name says
``_us``, shares fractions 0..1, and what cannot be known is None (JSON null), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpuscope.model.diagnosis import Stage
from gpuscope.model.efficiency import RankEfficiency
from gpuscope.model.profile import RankProfile
from gpuscope.model.serving import RankServing

Workload = Literal["training", "inference"]
RangeKind = Literal["record_function", "operator", "python", "runtime", "sync", "kernel", "collective", "memcpy",
                    "memset", "dataloader"]


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
class LongRange:
    """A named range that took longer in one step than it does in the rank's typical step."""

    name: str
    """The operator, ``record_function`` range, runtime call or kernel, as the trace names it."""
    kind: RangeKind
    """What it is: a ``record_function`` range, an operator, a Python function, a runtime call (``sync`` for a
    host-device synchronisation), a GPU kernel (``collective`` for a NCCL/RCCL kernel or host collective op), a
    copy, or the DataLoader's ``__next__``."""
    time_us: float
    """Its time in the step (its events summed, clipped to the step)."""
    extra_us: float
    """``time_us`` less its median time per steady step of the rank (0 in the steps it does not run in)."""


@dataclass(frozen=True)
class SlowStep:
    """A steady step of a rank that took at least ``step_stats.FLOOR`` (25%) longer than the rank's median step:
    one the job's outlier rule may name, with what took the extra time."""

    step: str
    """The step's number, as ``ProfilerStep#<step>`` gives it."""
    duration_us: float
    extra_us: float
    """``duration_us`` less the rank's median steady step."""
    ranges: tuple[LongRange, ...] = ()
    """The ranges whose extra time is at least half the step's, most extra first (at most three): an enclosing
    range comes before the ones inside it. Empty when no traced range took the extra time."""


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
    """The GPU waited for the host to launch work: the part of a gap before the call that launched the work
    closing it."""
    kernel_wait: float
    """Short gaps (< 30 µs) between back-to-back kernels."""
    other: float
    gpu_side_wait: float | None = None
    """The GPU waited on its own side: idle with work queued (launched, not started) for 100 µs or more of a gap, or
    a gap of 100 µs or more closed by work no recorded call launched while the host recorded nothing
    (``analyzers.trace.queue``):
    queued behind unrecorded work, another process, or a wait the trace does not show; never the host's time.
    None in reports saved before it existed."""


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
    """Kernel launches: how long kernels wait after their launch call (the latencies of ``RankReport.queue``, of
    which these are the median and 95th percentile), and how tiny they are."""

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
class LaunchLatency:
    """Launch-to-start latency of a rank's kernels over the whole window (Holistic Trace Analysis' launch delay):
    each kernel's start less the end of the runtime call that launched it, joined on the correlation id, never
    below 0 (a kernel may start before its launch call returns). In µs."""

    kernels: int
    """Kernels joined to the call that launched them."""
    graph_kernels: int
    """Of them, kernels a graph replay (cudaGraphLaunch, hipGraphLaunch) ran: their latency counts from the replay's
    call, so it holds their wait behind the replay's earlier kernels."""
    mean_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    """Percentiles by linear interpolation between closest ranks (numpy's default)."""
    max_us: float


@dataclass(frozen=True)
class StreamQueue:
    """Queue depth of one GPU stream over the whole window, as Holistic Trace Analysis counts it: up by one when a
    runtime call launches work onto the stream (at the call's start), down by one when that work starts."""

    device: int
    stream: int
    launches: int
    """GPU events (kernels, copies, sets) launched onto the stream by a recorded call."""
    max_depth: int
    mean_depth: float
    """HTA's mean: of the values the depth takes, one per change."""
    time_mean_depth: float | None
    """The depth averaged over time, from the stream's first launch to its last start; None when that span is 0."""


@dataclass(frozen=True)
class LaunchQueue:
    """Work handed to the GPU and not yet started, per rank (``analyzers.trace.queue``): how long kernels waited
    after their launch call, and how deep each stream's queue ran."""

    latency: LaunchLatency | None
    """None when no kernel was joined to its launch call."""
    streams: tuple[StreamQueue, ...] = ()
    """The streams with the most launches first, at most ``queue.MAX_STREAMS``."""
    streams_left_out: int = 0
    """Streams with launches not listed (beyond ``queue.MAX_STREAMS``)."""


@dataclass(frozen=True)
class FillingCall:
    """One runtime call that fills half the steady window or more by itself while the GPU does little
    (``analyzers.trace.queue.filling_call``): a blocking copy or a sync the host sat in, say."""

    name: str
    duration_us: float
    """The call's time inside the steady window."""
    share: float
    """``duration_us`` over the steady window."""
    gpu_busy: float
    """The GPU's busy share during the call (under 0.5: else the call is a host waiting for a working GPU)."""


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
class HostWait:
    """A named host range (an operator or a ``record_function`` annotation) the host was inside while the GPU sat
    idle in the steady window: where the host time the GPU waits for goes."""

    name: str
    idle_us: float
    """GPU idle time in the steady window (less the GPU-side wait) during which the host was inside a range of this
    name."""
    share: float
    """``idle_us`` over all the GPU's idle time in the steady window less the GPU-side wait. Ranges nest (an
    annotation around the ops it calls), so the shares of names that nest overlap and need not add up."""


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
    """The rank's step time: the mean of its steady steps, every one counted (the TensorBoard plugin's figure,
    ``analyzers.trace.step_stats.step_time_us``); None without profiler steps."""
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
    efficiency: RankEfficiency | None = None
    """FLOPs and bytes of the steady steps' operators from their recorded shapes (``analyzers.efficiency``);
    None in reports saved before it existed."""
    cpu_only: bool = False
    """The trace records no GPU activity (no kernel, copy or set, no CUDA/HIP runtime call, no GPU memory): a CPU
    process, counted as no GPU and priced as none (``RankTrace.gpu_active``)."""
    step_time_median_us: float | None = None
    """Median of the rank's steady steps; None without profiler steps."""
    step_time_p90_us: float | None = None
    """90th percentile of the rank's steady steps (linear interpolation between closest ranks)."""
    step_time_spread_us: float | None = None
    """Spread of the rank's steady steps: 1.4826 x their median absolute deviation from the median (the robust
    standard deviation, ``analyzers.trace.step_stats``)."""
    slow_steps: tuple[SlowStep, ...] = ()
    """Steady steps at least 25% longer than the rank's median, with the ranges that took the extra time: the
    candidates the job's slow-step rule (``Report.outlier_steps``, ``JobFacts.recurring``) picks from."""
    host_in_gpu_idle: tuple[HostWait, ...] = ()
    """The named host ranges that cover the most GPU idle time in the steady window, most first
    (``analyzers.trace.host_idle``); empty without GPU idle time or host ranges, and in reports saved before it."""
    stage_shares: dict[Stage, float] | None = None
    """This rank's stage shares of its typical step (the job's steady steps less the lone outlier): the report's
    ``stage_shares`` are their mean weighted by the ranks' windows. None for a rank without GPU work."""
    serving: RankServing | None = None
    """A serving engine's steps by phase (prefill, decode, mixed) and its CUDA/HIP graph replays; None when the
    trace shows neither."""
    queue: LaunchQueue | None = None
    """Launch-to-start latency and queue depth per stream (whole window); None without launched GPU work, when the
    host and GPU clocks disagree (``clock_skew_us``), and in reports saved before it existed."""
    filling_call: FillingCall | None = None
    """The one runtime call that fills half the steady window or more while the GPU is busy under half of it,
    where there is one."""
    step_source: str | None = None
    """What marked the rank's steps: "ProfilerStep", "engine" (a serving engine's step ranges: SGLang
    ``step[...]``, vLLM ``execute_...``), or "range NAME" (``--step-range NAME``); None without steps."""

    @property
    def span_us(self) -> float:
        """What the step breakdown covers: the mean steady step, or without profiler steps the steady window."""
        if self.step_time_us is not None:
            return self.step_time_us
        return self.steady_window_us if self.steady_window_us is not None else self.window_us

    @property
    def gpu_count(self) -> int:
        """The GPUs the rank used: those it ran work on (one when the trace cannot say which); none on a CPU-only
        rank."""
        return 0 if self.cpu_only else max(len(self.devices), 1)
