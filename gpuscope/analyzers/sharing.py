"""One GPU, several processes: the target's own part of each GPU it held, beside the GPU's whole.

Pure: a function of the run's samples. NVML's per-process rows (``collectors.nvml_procs``) give, per tick, the
target's SM and memory-bandwidth shares (its processes summed), its memory, and its neighbours: how many other
processes hold a context on the GPU and their SM shares together. From them:

- a GPU is *shared* when another process held a context on it at a tick the target did;
- the target's part of the GPU's cost, per tick, is ``tenant_parts``: its SM use over all processes' use where
  NVML measured both and some was used, else an equal part per process (the fleet splits a GPU between pods by
  the same rule); its part over the run is the mean over the ticks it held the GPU;
- on a shared GPU the diagnosis reads the target's own SM share as its busy share: the GPU being busy with a
  neighbour's kernels is not the job's work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

from gpuscope.model import schema
from gpuscope.model.live import GpuShare

if TYPE_CHECKING:
    import pandas as pd

IDLE_BUSY = 0.05
"""A tick under 5% busy is idle (the live summary's threshold)."""
_PROC_METRICS = (schema.PROC_GPU_MEMORY_BYTES, schema.PROC_GPU_SM_UTIL)


def tenant_parts(use: np.ndarray, total_use: np.ndarray, tenants: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each tenant's part of a GPU's cost per tick (or bucket), and whether that part was measured.

    ``use``: the tenant's measured use (NaN: unknown); ``total_use``: every tenant's together (NaN where any is
    unknown); ``tenants``: how many share the GPU. Measured where both are known and the total is above 0, else
    an equal part. The parts of the tenants of one GPU add up to 1 either way.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        measured = np.isfinite(use) & np.isfinite(total_use) & (total_use > 0)
        parts = np.where(measured, use / np.where(measured, total_use, 1.0), 1.0 / np.maximum(tenants, 1))
    return parts, measured


def gpu_shares(samples: pd.DataFrame, gpus: set[int], duration_s: float) -> tuple[GpuShare, ...]:
    """The target's part of each GPU it held a context on (of ``gpus`` when given)."""
    procs = samples[(samples["pid"] != schema.NO_PID) & (samples["gpu"] >= 0)
                    & (samples["source"] == schema.NVML)]
    held = procs[procs["metric"].isin(_PROC_METRICS)]
    out = []
    for gpu, rows in held.groupby("gpu", sort=True):
        if gpus and int(gpu) not in gpus:
            continue
        device = samples[(samples["gpu"] == gpu) & (samples["pid"] == schema.NO_PID)]
        out.append(_share(int(gpu), procs[procs["gpu"] == gpu], device, np.unique(rows["ts_ns"].to_numpy()),
                          duration_s))
    return tuple(out)


def _share(gpu: int, procs: pd.DataFrame, device: pd.DataFrame, ticks: np.ndarray, duration_s: float) -> GpuShare:
    def own(metric: str) -> np.ndarray:
        rows = procs[procs["metric"] == metric]
        out: np.ndarray = rows.groupby("ts_ns")["value"].sum().reindex(ticks).to_numpy(dtype=float)
        return out

    def gpu_wide(metric: str) -> np.ndarray:
        rows = device[device["metric"] == metric]
        out: np.ndarray = rows.groupby("ts_ns")["value"].mean().reindex(ticks).to_numpy(dtype=float)
        return out

    own_sm, others_sm, others = own(schema.PROC_GPU_SM_UTIL), gpu_wide(schema.GPU_OTHERS_SM_UTIL), \
        gpu_wide(schema.GPU_OTHER_PROCESSES)
    busy = gpu_wide(schema.GPU_UTIL)
    if np.isnan(busy).all():
        busy = gpu_wide(schema.GPU_GR_ENGINE_ACTIVE)
    parts, measured = tenant_parts(own_sm, own_sm + others_sm, 1 + np.nan_to_num(others))
    shared_ticks = np.nan_to_num(others) > 0
    sampled = device["ts_ns"].nunique()
    memory = own(schema.PROC_GPU_MEMORY_BYTES)
    total = device[device["metric"] == schema.GPU_MEMORY_TOTAL_BYTES]["value"]
    known_sm = own_sm[np.isfinite(own_sm)]
    return GpuShare(
        gpu=gpu, held_s=duration_s * min(len(ticks) / sampled, 1.0) if sampled else duration_s,
        shared=bool(shared_ticks.any()), own_sm_mean=_mean(own_sm),
        own_mem_util_mean=_mean(own(schema.PROC_GPU_MEM_UTIL)), others_sm_mean=_mean(others_sm),
        gpu_busy_mean=_mean(busy),
        own_idle_share=float((known_sm < IDLE_BUSY).mean()) if len(known_sm) else None,
        own_memory_peak_bytes=int(np.nanmax(memory)) if np.isfinite(memory).any() else None,
        memory_total_bytes=int(total.max()) if len(total) else None,
        other_processes_max=int(np.nanmax(others)) if np.isfinite(others).any() else None,
        cost_part=float(parts.mean()) if len(parts) else None,
        cost_basis=_basis(measured[shared_ticks]) if shared_ticks.any() else None,
    )


def _basis(measured: np.ndarray) -> Literal["measured", "even", "mixed"]:
    return "measured" if measured.all() else "even" if not measured.any() else "mixed"


def _mean(values: np.ndarray) -> float | None:
    known = values[np.isfinite(values)]
    return float(known.mean()) if len(known) else None
