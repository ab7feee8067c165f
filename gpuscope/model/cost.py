"""Inputs of the cost model: the price a run is charged at, and what the user said about the job."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
