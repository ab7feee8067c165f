"""Energy the run's GPUs drew: one definition for the live summary and the cost.

Pure. Per GPU, from one source (``one_source``: NVML before DCGM before the rest), NVML's energy
counter differenced over the run. A step down is the counter restarting (a driver reload): then power
integrated over time (trapezoids) when the GPU reported power, as it covers the whole run; else the
counter's rises, losing the restart's interval rather than counting it negative. Without two
counter readings, power integrated over time. Only the run's GPUs count: a job on one GPU of an
eight-GPU node is charged for one.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Literal

import numpy as np

from gpuscope.model import schema

if TYPE_CHECKING:
    import pandas as pd

EnergySource = Literal["energy_counter", "power_integral"]
SOURCE_PREFERENCE = (schema.NVML, schema.DCGM)
"""Which source a GPU metric is read from when several sent it; any other source (replay, prometheus) after these."""
NS_PER_S = 1e9


def one_source(device: pd.DataFrame) -> pd.DataFrame:
    """Rows of one source per (gpu, metric), by ``SOURCE_PREFERENCE`` then by name.

    NVML and DCGM both report utilization, power, energy and memory: pooled, their means count a GPU
    twice, and two interleaved energy counters differenced together give nonsense. A metric only one
    source reports (DCGM's sm_active, say) still comes from that source.
    """
    names = sorted(set(device["source"]))
    if len(names) <= 1:
        return device
    order = [*(s for s in SOURCE_PREFERENCE if s in names), *(s for s in names if s not in SOURCE_PREFERENCE)]
    rank = device["source"].map({s: i for i, s in enumerate(order)})
    best = rank.groupby([device["gpu"], device["metric"]]).transform("min")
    return device[rank == best]


def gpu_energy_j(rows: pd.DataFrame) -> tuple[float | None, EnergySource | None]:
    """Joules one GPU drew over ``rows`` (its device rows), and how that was found; (None, None) if unknown."""
    rows = one_source(rows)
    counter = rows[rows["metric"] == schema.GPU_ENERGY_J].sort_values("ts_ns", kind="stable")
    power = rows[rows["metric"] == schema.GPU_POWER_W].sort_values("ts_ns", kind="stable")
    steps = np.diff(counter["value"].to_numpy(dtype=float)) if len(counter) >= 2 else None
    if steps is not None and (steps >= 0).all():
        return float(steps.sum()), "energy_counter"
    if len(power) >= 2:  # no counter, or one that restarted: power covers the whole run
        t_s = power["ts_ns"].to_numpy(dtype=float) / NS_PER_S
        watts = power["value"].to_numpy(dtype=float)
        return float(np.sum((watts[1:] + watts[:-1]) / 2 * np.diff(t_s))), "power_integral"
    if steps is not None:
        return float(steps[steps > 0].sum()), "energy_counter"
    return None, None


def run_energy_j(samples: pd.DataFrame | None, gpus: Collection[int] = ()) -> tuple[float | None, str | None]:
    """Joules the run's GPUs drew together, and the source ("energy_counter", "power_integral", or both
    joined by "+"). ``gpus`` are the run's GPU indices (``meta.gpus``); empty means every GPU sampled.

    None when one of the run's GPUs has neither counter nor power: a partial sum would read as the whole.
    """
    if samples is None or samples.empty:
        return None, None
    device = samples[(samples["gpu"] >= 0) & (samples["pid"] == schema.NO_PID)]
    if gpus:
        device = device[device["gpu"].isin(list(gpus))]
    total_j, kinds = 0.0, set()
    for _, rows in device.groupby("gpu"):
        joules, kind = gpu_energy_j(rows)
        if joules is None or kind is None:
            return None, None
        total_j += joules
        kinds.add(kind)
    if not kinds:
        return None, None
    return total_j, "+".join(sorted(kinds))
