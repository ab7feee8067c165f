"""Inputs of the cost model: the price a run is charged at, and what the user said about the job."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuOffer:
    """One GPU model of the price catalog, as right-sizing weighs it."""

    model: str
    """The catalog's name, e.g. "L4"."""
    usd_per_gpu_hour: float
    memory_bytes: int
    source: str


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


@dataclass(frozen=True)
class JobSpec:
    """What the user told gpuscope about the whole job, to project a sample's cost onto it."""

    job_hours: float | None = None
    job_steps: int | None = None
    samples_per_step: int | None = None
    grid_kg_co2_per_kwh: float | None = None
    grid_source: str | None = None
    """Where ``grid_kg_co2_per_kwh`` came from (the shipped default's publication, an env var, ...)."""
