"""The running cost `gpuscope top` shows: each GPU's price per hour over the time top has watched it, and each
process's part of it.

A process's part of a GPU for one frame is the rule every view of a shared GPU uses (``sharing.tenant_parts``):
its SM share over all the GPU's processes' SM shares where the driver measured every one and some was used, else
an equal part per process. The parts of one GPU's processes add up to the GPU's cost; a GPU with no process costs
what it costs, idle.
"""

from __future__ import annotations

import numpy as np

from gpuscope.analyzers.sharing import tenant_parts
from gpuscope.model.node import NodeSnapshot, ProcessNow, RunningCost

NS_PER_HOUR = 3_600 * 10**9


def accumulate(cost: RunningCost | None, snapshot: NodeSnapshot) -> RunningCost:
    """``cost`` carried on to ``snapshot`` (the first snapshot starts it at zero): the time since the last one is
    charged at each GPU's price, split between the processes ``snapshot`` found on it."""
    if cost is None:
        return RunningCost(since_ns=snapshot.ts_ns, until_ns=snapshot.ts_ns, gpu_usd={}, process_usd={},
                           process_usd_per_hour={}, total_usd=_total(snapshot, {}))
    hours = max(snapshot.ts_ns - cost.until_ns, 0) / NS_PER_HOUR
    gpu_usd = dict(cost.gpu_usd)
    process_usd = dict(cost.process_usd)
    per_hour: dict[tuple[int, int], float] = {}
    for gpu in snapshot.gpus:
        if gpu.usd_per_hour is None:
            continue
        gpu_usd[gpu.index] = gpu_usd.get(gpu.index, 0.0) + gpu.usd_per_hour * hours
        procs = [p for p in snapshot.processes if p.gpu == gpu.index]
        for proc, part in zip(procs, parts(procs)):
            key = (gpu.index, proc.pid)
            per_hour[key] = gpu.usd_per_hour * part
            process_usd[key] = process_usd.get(key, 0.0) + per_hour[key] * hours
    return RunningCost(since_ns=cost.since_ns, until_ns=snapshot.ts_ns, gpu_usd=gpu_usd, process_usd=process_usd,
                       process_usd_per_hour=per_hour, total_usd=_total(snapshot, gpu_usd))


def parts(procs: list[ProcessNow]) -> list[float]:
    """Each process's part of its GPU (they share one) for a frame."""
    if not procs:
        return []
    use = np.array([np.nan if p.sm_share is None else p.sm_share for p in procs], dtype=float)
    together = np.full(use.shape, use.sum())  # NaN when any share is unknown: then an equal part each
    shares, _measured = tenant_parts(use, together, np.full(use.shape, len(procs)))
    return [float(x) for x in shares]


def _total(snapshot: NodeSnapshot, gpu_usd: dict[int, float]) -> float | None:
    """Whole GPUs only: a MIG instance's cost is a part of its GPU's, already counted."""
    whole = [g for g in snapshot.gpus if g.mig_profile is None and g.usd_per_hour is not None]
    return sum(gpu_usd.get(g.index, 0.0) for g in whole) if whole else None
