"""The cost model: its inputs (the price a run is charged at, what the user said about the job) and what it reports
(``CostReport``, part of the report: schema ``gpuscope.report/1``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PROFILE = re.compile(r"^(?:\d+c\.)?(\d+)g\.(\d+(?:\.\d+)?)gb(?:\+\w+)*$")


@dataclass(frozen=True)
class GpuOffer:
    """One GPU model of the price catalog, as right-sizing weighs it."""

    model: str
    """The catalog's name, e.g. "L4"."""
    usd_per_gpu_hour: float
    memory_bytes: int
    source: str


@dataclass(frozen=True)
class MigProfile:
    """A MIG GPU instance profile, "<compute slices>g.<memory GB>gb" ("3g.40gb"; "+me" adds media engines; a
    compute-instance name "1c.3g.40gb" stands for its GPU instance, 3g.40gb)."""

    name: str
    compute_slices: int
    memory_gb: float
    """The profile's nominal memory (decimal GB, as the name and the price catalog give it)."""

    @classmethod
    def parse(cls, name: str | None) -> MigProfile | None:
        """The profile a name (DCGM's GPU_I_PROFILE, NVML's "... MIG 1g.10gb") stands for; None when it is none."""
        match = _PROFILE.match((name or "").strip().lower())
        if match is None or int(match.group(1)) < 1:
            return None
        return cls(name=name or "", compute_slices=int(match.group(1)), memory_gb=float(match.group(2)))

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * 10**9)


@dataclass(frozen=True)
class Price:
    """USD per GPU-hour for a run's GPUs, and where that number came from.

    ``usd_per_gpu_hour`` is None when the GPU is not in the catalog and the user set no price:
    the cost is then unknown (null), never a made-up number.
    """

    usd_per_gpu_hour: float | None
    source: str | None
    """E.g. "catalog: AWS p5.48xlarge on-demand (2026-11)", "--usd-per-gpu-hour", "GPUSCOPE_USD_PER_GPU_HOUR"."""
    gpu_model: str | None = None
    note: str | None = None
    """Shown to the user when the price is unknown: how to set one."""
    catalog_model: str | None = None
    """The catalog entry ``gpu_model`` matched (e.g. "H100 SXM 80GB"); None when it matched none."""
    offers: tuple[GpuOffer, ...] = ()
    """The priced GPUs of the catalog (with the user's per-model prices applied), for right-sizing."""
    mig_profiles: tuple[MigProfile, ...] = ()
    """The MIG profiles the catalog lists for ``catalog_model`` (none for a GPU without MIG, or an unknown one)."""
    gpu_share: float | None = None
    """Set when the run's GPUs are MIG instances: ``usd_per_gpu_hour`` is then this share of
    ``whole_usd_per_gpu_hour``, their parent GPU's price (``pricing.mig``). None: whole GPUs."""
    whole_usd_per_gpu_hour: float | None = None
    share_basis: str | None = None
    """How ``gpu_share`` was reached, in words ("MIG 1g.10gb: 1 of the H100 SXM 80GB's 7 compute slices")."""

    @property
    def mig_compute_slices(self) -> int | None:
        """The whole GPU's compute slices (7 on A100, H100, H200, B200; 4 on A30): its largest profile's."""
        return max((p.compute_slices for p in self.mig_profiles), default=None)

    def slice_share(self, profile: str | None) -> float | None:
        """A MIG instance's share of this GPU's price: its compute slices over the GPU's (1g = 1/7 on an H100);
        None when the profile or the GPU's slices are unknown."""
        parsed, whole = MigProfile.parse(profile), self.mig_compute_slices
        if parsed is None or whole is None or parsed.compute_slices > whole:
            return None
        return parsed.compute_slices / whole


@dataclass(frozen=True)
class JobSpec:
    """What the user told gpuscope about the whole job, to project a sample's cost onto it."""

    job_hours: float | None = None
    job_steps: int | None = None
    samples_per_step: int | None = None
    grid_kg_co2_per_kwh: float | None = None
    grid_source: str | None = None
    """Where ``grid_kg_co2_per_kwh`` came from (the shipped default's publication, an env var, ...)."""


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
    outlier_steps: float | None = None
    """The outlier steps' time over the typical step (``Report.outlier_steps``), unless the GPU computed in it;
    the stages above share the rest of the run's time. None in a run without outliers."""


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
    target_mfu: float | None = None
    """The attainable MFU the gap is priced to (``--target-mfu``); None without an MFU."""
    mfu_gap_usd: float | None = None
    """(1 - MFU / target_mfu) x the (projected) cost, when MFU is below the target: what the same work would not
    cost at the target's efficiency. None without an MFU or a price; 0 at or above the target."""


def gpu_time(gpu_hours: float | None) -> str:
    """GPU time in the unit that reads, the one way every view and every estimate's reasoning writes it:
    "2.5 GPU-h", "12.0 GPU-min", "1.07 GPU-s"."""
    if gpu_hours is None:
        return "n/a"
    if gpu_hours >= 1:
        return f"{gpu_hours:,.1f} GPU-h"
    if gpu_hours * 60 >= 1:
        return f"{gpu_hours * 60:.1f} GPU-min"
    return f"{gpu_hours * 3600:.3g} GPU-s"
