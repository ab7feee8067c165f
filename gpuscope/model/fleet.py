"""What fleet mode reads from Prometheus and what it reports: per-GPU bucket series in, groups and idle GPUs out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

import numpy as np

from gpuscope.model.diagnosis import Recommendation
from gpuscope.model.serving import FleetServingData, ServingPod

FLEET_SCHEMA: Final = "gpuscope.fleet/1"

UTIL: Final = "util"
"""DCGM_FI_DEV_GPU_UTIL / 100: share of time a kernel ran (nvidia-smi's "GPU-Util"), 0..1."""
GR_ENGINE: Final = "gr_engine_active"
"""DCGM_FI_PROF_GR_ENGINE_ACTIVE, 0..1: the same question asked of the profiler; the only one on MIG instances."""
SM_ACTIVE: Final = "sm_active"
DRAM_ACTIVE: Final = "dram_active"
TENSOR_ACTIVE: Final = "tensor_active"
"""DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, 0..1: the share of cycles the tensor pipes were busy."""
SM_OCCUPANCY: Final = "sm_occupancy"
"""DCGM_FI_PROF_SM_OCCUPANCY, 0..1."""
MEMORY_USED_BYTES: Final = "memory_used_bytes"
"""Peak framebuffer use in the bucket."""
POWER_W: Final = "power_w"
ENERGY_J: Final = "energy_j"
"""Increase of DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION over the bucket."""
POD_SM_UTIL: Final = "pod_sm_util"
"""A pod's own SM share of a GPU it shares (time-slicing), 0..1, where an exporter gives one per pod
(``dcgm_fi_dev_sm_util_per_pod``, percent): what a shared GPU's cost is split by."""
METRICS: Final = (UTIL, GR_ENGINE, SM_ACTIVE, DRAM_ACTIVE, MEMORY_USED_BYTES, POWER_W, ENERGY_J, POD_SM_UTIL,
                  TENSOR_ACTIVE, SM_OCCUPANCY)

@dataclass(frozen=True)
class FleetWindow:
    """The window asked of Prometheus: ``buckets`` steps of ``step_ns``, the first ending at ``start_ns + step_ns``.

    Bucket ``i`` covers (start + i * step, start + (i + 1) * step]: one ``*_over_time(...[step])`` value each.
    """

    start_ns: int
    step_ns: int
    buckets: int

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.step_ns * self.buckets

    @property
    def step_hours(self) -> float:
        return self.step_ns / 3.6e12


@dataclass(frozen=True)
class GpuSeriesInfo:
    """One GPU under one owner, as the series' labels tell it (a GPU that changed pods is one entry per pod).

    ``labels`` holds every label of the series, lowercased names, without ``__name__``; None fields were absent.
    """

    host: str | None
    gpu: int
    """DCGM's index, or ``schema.mig_gpu(parent, GPU_I_ID)`` for a MIG instance."""
    uuid: str | None
    model: str | None
    pod: str | None
    namespace: str | None
    mig_profile: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class FleetData:
    """Everything Prometheus answered, as the analysis takes it: the input a saved fleet run keeps.

    ``values[g, m, b]`` is metric ``metrics[m]`` of ``gpus[g]`` in bucket ``b``; NaN where the series had no sample
    in that bucket (a gap, never a 0).
    """

    prometheus_url: str
    selector: str
    window: FleetWindow
    gpus: tuple[GpuSeriesInfo, ...]
    metrics: tuple[str, ...]
    values: np.ndarray
    warnings: tuple[str, ...] = ()
    serving: FleetServingData | None = None
    """The serving engines' metrics (vLLM, SGLang, TGI) of the same Prometheus, by pod; None when it has none."""

    def metric(self, name: str) -> np.ndarray:
        """The (gpus x buckets) array of ``name``; all NaN when it was not asked for."""
        if name not in self.metrics:
            return np.full((len(self.gpus), self.window.buckets), np.nan)
        return self.values[:, self.metrics.index(name), :]


@dataclass(frozen=True)
class Thresholds:
    """What counts as idle or under-used."""

    idle_below: float = 0.05
    """A bucket whose mean busy share is under this is idle."""
    idle_share: float = 0.8
    """A GPU idle in at least this share of the time it reported is an idle GPU."""
    share_below: float = 0.3
    """Inference services busy under this on average could share a GPU (MIG, MPS, time-slicing)."""


@dataclass(frozen=True)
class GpuUsage:
    """One GPU series' figures over the window (hours count only buckets with a sample)."""

    info: GpuSeriesInfo
    group: str
    allocated: bool
    hours: float
    busy: float | None
    idle_hours: float
    underused_hours: float
    usd_per_gpu_hour: float | None
    energy_kwh: float | None
    sm_active: float | None
    dram_active: float | None
    peak_memory_bytes: float | None
    source: str | None
    price_share: float | None = None
    """The share of its model's price this series is charged per hour: 1 for a whole GPU, a MIG instance's compute
    slices over its GPU's (``Price.slice_share``); None where unknown (then ``usd_per_gpu_hour`` is None too)."""
    shared_hours: float = 0.0
    """This series' part of the GPU-hours in buckets where other pods' series reported the same GPU."""
    split: Literal["measured", "even", "mixed"] | None = None
    """How its part of a shared GPU was found: the pods' measured SM use, an equal part, or both over the window."""
    tensor_active: float | None = None
    """Mean DCGM tensor-pipe activity over the window; None where the exporter does not give it."""
    sm_occupancy: float | None = None


@dataclass(frozen=True)
class GroupReport:
    """One job, pod, namespace or host over the window. Dollars are None where a GPU's price is unknown."""

    name: str
    gpus: int
    """Distinct GPUs (host, index) the group held at some time in the window."""
    gpu_hours: float
    """Hours with samples, summed over the group's GPUs (gaps are not counted)."""
    busy: float | None
    """Time-weighted mean busy share over those hours, 0..1."""
    idle_gpu_hours: float
    cost_usd: float | None
    wasted_usd: float | None
    """idle_usd + underused_usd."""
    idle_usd: float | None
    """Price x GPU-hours in idle buckets."""
    underused_usd: float | None
    """Price x (1 - busy) x GPU-hours in the other buckets."""
    energy_kwh: float | None
    sm_active: float | None = None
    dram_active: float | None = None
    peak_memory_bytes: int | None = None
    models: tuple[str, ...] = ()
    mig_profiles: tuple[str, ...] = ()
    """The MIG profiles of the instances the group held ("1g.10gb"); empty on whole GPUs."""
    shared_gpu_hours: float = 0.0
    """The group's GPU-hours on GPUs it shared with other pods (its part of them, as in ``gpu_hours``)."""
    split: Literal["measured", "even", "mixed"] | None = None
    """How those GPUs' cost was split between the pods (None: it shared none)."""
    tensor_active: float | None = None
    """GPU-hour-weighted mean tensor-pipe activity of the GPUs that gave it (beside ``sm_active``)."""
    sm_occupancy: float | None = None


@dataclass(frozen=True)
class IdleGpu:
    """A GPU held by a group but idle for most of the time it reported."""

    host: str | None
    gpu: int
    uuid: str | None
    model: str | None
    group: str
    busy: float | None
    idle_share: float
    gpu_hours: float
    cost_usd: float | None
    mig_profile: str | None = None


@dataclass(frozen=True)
class FleetReport:
    """The fleet view (``gpuscope fleet --json``): every other view prints this object."""

    schema: str = FLEET_SCHEMA
    run_id: str | None = None
    """The saved fleet run this report belongs to (``gpuscope show RUN_ID``)."""
    prometheus_url: str = ""
    selector: str = ""
    group_by: str = "pod"
    start_ns: int = 0
    end_ns: int = 0
    step_s: float = 0.0
    gpus: int = 0
    gpu_hours: float = 0.0
    busy: float | None = None
    cost_usd: float | None = None
    wasted_usd: float | None = None
    idle_usd: float | None = None
    energy_kwh: float | None = None
    groups: tuple[GroupReport, ...] = ()
    idle_gpus: tuple[IdleGpu, ...] = ()
    recommendations: tuple[Recommendation, ...] = ()
    prices: dict[str, float | None] = field(default_factory=dict)
    """USD per GPU-hour by GPU model as labelled (None: unknown), and ``price_sources`` says from where."""
    price_sources: dict[str, str | None] = field(default_factory=dict)
    thresholds: Thresholds = field(default_factory=Thresholds)
    busy_source: dict[str, int] = field(default_factory=dict)
    """How many GPU series measured busy by each metric (util, gr_engine_active)."""
    shared_gpus: int = 0
    """GPUs (host, index) that several pods' series reported in one bucket: each pod pays its part, never the whole."""
    split: Literal["measured", "even", "mixed"] | None = None
    """How the shared GPUs' cost was split: by the pods' measured SM use (a per-pod series), evenly, or both."""
    timeline_ns: tuple[int, ...] = ()
    """Bucket end times of ``timeline_busy``."""
    timeline_busy: tuple[float | None, ...] = ()
    """The fleet's mean busy share per bucket, over the GPUs that reported in it."""
    warnings: tuple[str, ...] = ()
    serving: tuple[ServingPod, ...] = ()
    """Pods that serve (vLLM, SGLang, TGI metrics in the same Prometheus), their tokens, load, latency and what a
    million tokens cost on their GPUs; most output tokens first."""
