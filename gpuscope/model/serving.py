"""What an inference server did and what its tokens cost: engine metrics (vLLM, SGLang, TGI) over a window, the
prefill and decode steps of a serving trace, and the CUDA/HIP graph replays inside them.

Rates are per second of the window the metrics cover; dollars follow the GPU cost of the server's GPUs over the
same time (a MIG slice's or a shared GPU's part, as the cost elsewhere). Shares are 0..1. A value the server or the
trace does not give is None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:  # only the fleet's serving matrix holds an array: a saved report decodes without numpy
    import numpy as np

Engine = Literal["vllm", "sglang", "tgi"]
PhaseName = Literal["prefill", "decode", "mixed"]
PHASES: Final[tuple[PhaseName, ...]] = ("prefill", "decode", "mixed")
"""prefill: steps that only read prompts (SGLang EXTEND, vLLM context-only batches); decode: steps that only
generate (one new token per request); mixed: steps that do both (chunked prefill, SGLang MIXED)."""


@dataclass(frozen=True)
class Latency:
    """One latency histogram over the window: percentiles as Prometheus' ``histogram_quantile`` gives them (linear
    within a bucket) from the buckets' increase, and the mean from its sum and count."""

    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    mean_s: float | None
    observations: float
    """Requests (or tokens, for inter-token latency) observed in the window."""


@dataclass(frozen=True)
class ServingMetrics:
    """One server (or a pod's servers) over a window: throughput, load, cache, latency and what a token cost."""

    engine: Engine | None
    """Whose metric names the server spoke; None when it exported none gpuscope reads."""
    window_s: float | None
    """Seconds the token counters cover."""
    output_tokens_per_s: float | None
    prompt_tokens_per_s: float | None
    output_tokens: float | None = None
    """Generated tokens in the window (the counter's increase)."""
    prompt_tokens: float | None = None
    usd_per_hour: float | None = None
    """What the server's GPUs cost per hour while it ran: the rate every ``usd_per_million_*`` divides."""
    usd_per_million_output_tokens: float | None = None
    """The GPUs' cost over the output tokens: the whole cost charged to generated tokens."""
    usd_per_million_prompt_tokens: float | None = None
    """The whole cost charged to prompt tokens (the price of reading a prompt, if the server did nothing else)."""
    usd_per_million_tokens: float | None = None
    """Blended: the cost over prompt and output tokens together."""
    kv_cache_usage: float | None = None
    """Mean share of the KV cache in use (vLLM kv_cache_usage_perc / gpu_cache_usage_perc, SGLang token_usage)."""
    kv_cache_usage_max: float | None = None
    requests_running: float | None = None
    """Mean requests in the running batch."""
    requests_waiting: float | None = None
    """Mean requests queued, waiting for a place in the batch."""
    requests_waiting_max: float | None = None
    ttft: Latency | None = None
    """Time to first token."""
    inter_token_latency: Latency | None = None
    e2e_latency: Latency | None = None
    joules_per_output_token: float | None = None
    """The GPUs' energy (NVML's or DCGM's energy counter, else power integrated) over the output tokens."""
    gpu_busy: float | None = None
    """The server's GPUs' busy share over the window, 0..1 (the figure the over-provisioning advice reads)."""
    watts: float | None = None
    """Mean power of the server's GPUs (its part of them) over the window."""
    warnings: tuple[str, ...] = ()
    """What the metrics could not be read from, one line each, the engine's metric named: a latency histogram whose
    buckets are broken (its figures n/a), series skipped as unreadable."""


@dataclass(frozen=True)
class ServingPod:
    """A pod of the fleet that serves: its engine metrics joined to the GPUs Prometheus saw it hold."""

    name: str
    """``namespace/pod`` (the pod alone when the series have no namespace)."""
    namespace: str | None
    pod: str
    gpus: int
    """GPU series the pod held (a MIG instance counts as one)."""
    gpu_hours: float
    """Its part of the GPU-hours (a shared GPU's part, a MIG slice whole)."""
    cost_usd: float | None
    metrics: ServingMetrics
    models: tuple[str, ...] = ()
    mig_profiles: tuple[str, ...] = ()
    busy_source: str | None = None
    """The DCGM field its GPU busy share came from (DCGM_FI_DEV_GPU_UTIL; DCGM_FI_PROF_GR_ENGINE_ACTIVE on MIG)."""


@dataclass(frozen=True)
class PhaseStats:
    """One phase's steps on one rank, as sums, so ranks add up (``ServingPhase`` is made from these)."""

    steps: int
    span_us: float
    """The steps' time together: each from its range's start to the end of the GPU work it launched."""
    busy_us: float
    """GPU busy time (kernels, copies, memsets, graph replays) within those spans."""
    tokens: int | None = None
    """Tokens the engine's ranges say the steps processed (prompt tokens for prefill, one per request for decode);
    None where the ranges do not say."""
    gpu_wait_us: float = 0.0
    """GPU-side wait within those spans (``analyzers.trace.queue``): idle with launched work queued, or nothing on
    the host to blame."""


@dataclass(frozen=True)
class ServingPhase:
    """One phase over the job: its share of the steps' time, how many steps, their mean length and GPU busy."""

    share: float
    """Of the time in all classified steps."""
    steps: int
    step_time_us: float
    """Mean step, from the step range's start to the end of the GPU work it launched."""
    gpu_busy: float | None
    """GPU busy time within the phase's steps over their time, 0..1."""
    bottleneck: Literal["gpu", "host", "gpu_wait"] | None = None
    """Where the GPU is busy under half the step: "gpu_wait" when the GPU-side wait (work queued, or nothing on the
    host to blame) is half its idle time or more, else "host" (launches, scheduling, syncs hold it back); "gpu"
    otherwise."""
    tokens_per_step: float | None = None
    gpu_wait: float | None = None
    """The GPU-side wait within the phase's steps over their time, 0..1."""


@dataclass(frozen=True)
class GraphKernel:
    """Kernels of one name a graph replayed (or, from a capture trace, the operator that captured them)."""

    name: str
    calls: int
    total_us: float | None
    """Their GPU time; None where the trace did not record the replayed kernels."""


@dataclass(frozen=True)
class GraphReplay:
    """Replays of one CUDA/HIP graph (cudaGraphLaunch, hipGraphLaunch): one launch on the host, many kernels."""

    name: str
    """The capture range that made it (``capture_32_DECODE``) where a capture trace says, else "graph N"."""
    replays: int
    kernels_per_replay: float | None
    """Kernels each replay ran, as recorded; from the capture where the trace recorded none."""
    gpu_time_us: float | None
    """GPU time of all its replays: the union of their kernels, or where none were recorded the time from each
    launch to the host call that waited for it (an upper bound); None where nothing bounds it."""
    recorded: bool
    """True when the trace holds the replayed kernels themselves; False when ``gpu_time_us`` is estimated."""
    kernels: tuple[GraphKernel, ...] = ()
    """Most GPU time first."""
    operators: tuple[GraphKernel, ...] = ()
    """From a capture trace: the operators whose kernels the graph replays, with those kernels' GPU time."""


@dataclass(frozen=True)
class RankServing:
    """What one rank's trace says of serving: its phases as sums, and its graph replays."""

    phases: dict[str, PhaseStats] = field(default_factory=dict)
    phase_source: Literal["engine_ranges", "attention_kernels"] | None = None
    """How steps were told apart: the engine's own ranges (SGLang ``step[EXTEND ...]``, vLLM
    ``execute_context_N(...)_generation_M(...)``), or the attention kernels each step ran."""
    graphs: tuple[GraphReplay, ...] = ()
    estimated_graph_us: float = 0.0
    """GPU time of replays whose kernels the trace did not record, added to the rank's GPU time as graph work."""


@dataclass(frozen=True)
class ServingReport:
    """``Report.serving``: the server's metrics (live runs with ``--serving-metrics``), the phases and graph replays
    of its traces."""

    metrics: ServingMetrics | None = None
    source: str | None = None
    """The metrics endpoint, without credentials."""
    phases: dict[str, ServingPhase] = field(default_factory=dict)
    phase_source: str | None = None
    graphs: tuple[GraphReplay, ...] = ()


@dataclass(frozen=True)
class ServingSeriesInfo:
    """One pod's serving series in the fleet's Prometheus: its labels and the engine whose names it spoke."""

    namespace: str | None
    pod: str
    engine: Engine | None


@dataclass(frozen=True)
class PodHistogram:
    """A latency histogram of one pod, its buckets' increase summed over the window (bounds as Prometheus writes
    ``le``: "0.5", "+Inf")."""

    pod: int
    """Index into ``FleetServingData.pods``."""
    histogram: str
    """``model.schema.SERVING_HISTOGRAMS`` name."""
    bounds: tuple[str, ...]
    counts: tuple[float | None, ...]
    """Each bucket's observations over the window; None where a series could not give it."""
    sum_s: float | None = None
    count: float | None = None
    """The ``_count``'s increase (None in runs saved before it was asked for)."""


@dataclass(frozen=True)
class SkippedSeries:
    """Series of one pod and metric that Prometheus answered but gpuscope could not read, left out and counted."""

    pod: int
    """Index into ``FleetServingData.pods``."""
    metric: str
    """The engine's own name of the metric (``vllm:generation_tokens_total``)."""
    reason: str
    series: int


@dataclass(frozen=True, eq=False)
class FleetServingData:
    """What the fleet's Prometheus answered of serving engines, per pod and bucket: counters as their increase in
    each bucket (each series' own, summed over the pod's series; ``NAME.seconds`` the seconds of the buckets its
    series' readings span), gauges as their mean (and maximum) in it; NaN where the pod had no sample (a gap,
    never 0)."""

    pods: tuple[ServingSeriesInfo, ...]
    metrics: tuple[str, ...]
    values: np.ndarray
    """(pods x metrics x buckets)."""
    histograms: tuple[PodHistogram, ...] = ()
    skipped: tuple[SkippedSeries, ...] = ()

    def metric(self, name: str) -> np.ndarray:
        """The (pods x buckets) array of ``name``; all NaN when it was not asked for."""
        import numpy as np

        if name not in self.metrics:
            return np.full((len(self.pods), self.values.shape[-1] if self.values.ndim == 3 else 0), np.nan)
        out: np.ndarray = self.values[:, self.metrics.index(name), :]
        return out


@dataclass(frozen=True)
class CapturedGraph:
    """What one CUDA/HIP graph capture recorded (a capture trace: the profiler running while vLLM or SGLang
    captured its graphs): the kernels launched into the graph, in order, each with the operator that launched it."""

    name: str
    """The capture's range (``capture_32_DECODE``), else "capture N"."""
    kernels: tuple[str, ...]
    operators: tuple[str | None, ...]
    """The innermost host operator around each launch (None where none was open)."""
