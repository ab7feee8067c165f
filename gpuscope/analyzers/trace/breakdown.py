"""The step-time breakdown of the PyTorch profiler's TensorBoard plugin, and the GPU-side interval sets.

Each moment of a step goes to the first category that covers it, in the plugin's priority order
Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec > Other,
so the parts of each step add up to the step's duration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace import classify
from gpuscope.analyzers.trace.intervals import Intervals, covers, is_merged, merge, unique
from gpuscope.analyzers.trace.steps import Steps
from gpuscope.model.rank import StepBreakdown
from gpuscope.model.trace import Kind, RankTrace

HOST = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)
CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec")


@dataclass(frozen=True)
class Roles:
    """Merged interval sets by role, the input of every time breakdown of a rank."""

    kernel: Intervals
    """Compute kernels (communication kernels excluded)."""
    memcpy: Intervals
    memset: Intervals
    communication: Intervals
    """Communication kernels, and host collective ops."""
    comm_kernels: Intervals
    runtime: Intervals
    dataloader: Intervals
    cpu_exec: Intervals
    gpu_any: Intervals
    """Union of every kernel, memcpy and memset."""
    comm_kernel_mask: npt.NDArray[np.bool_]

    def in_priority(self) -> tuple[Intervals, ...]:
        return (self.kernel, self.memcpy, self.memset, self.communication, self.runtime, self.dataloader,
                self.cpu_exec)


def comm_kernel_mask(trace: RankTrace) -> npt.NDArray[np.bool_]:
    """Kernels that belong to a collective: by name, or launched under a host collective op."""
    ev = trace.events
    kernels = ev.kind == Kind.KERNEL
    by_name = trace.name_mask(classify.is_comm_kernel, Kind.KERNEL)
    collective_ops = trace.name_mask(classify.is_collective_op, Kind.CPU_OP, Kind.USER_ANNOTATION)
    ext = unique(ev.external_id[collective_ops & (ev.external_id >= 0)])
    by_op = kernels & (ev.external_id >= 0) & np.isin(ev.external_id, ext)
    return np.asarray(by_name | by_op, dtype=bool)


def roles(trace: RankTrace) -> Roles:
    ev = trace.events
    start, end = ev.ts_ns, ev.end_ns

    def of(mask: npt.NDArray[np.bool_]) -> Intervals:
        return merge(start[mask], end[mask])

    comm_k = comm_kernel_mask(trace)
    host = ev.mask(*HOST)
    dataloader = trace.name_mask(classify.is_dataloader_op, *HOST)
    collective = trace.name_mask(classify.is_collective_op, *HOST)
    comm_kernels = of(comm_k)
    return Roles(
        kernel=of((ev.kind == Kind.KERNEL) & ~comm_k),
        memcpy=of(ev.kind == Kind.MEMCPY),
        memset=of(ev.kind == Kind.MEMSET),
        communication=of(comm_k | collective),
        comm_kernels=comm_kernels,
        runtime=of(ev.kind == Kind.RUNTIME),
        dataloader=of(dataloader),
        cpu_exec=of(host & ~dataloader & ~collective),
        gpu_any=of(ev.mask(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)),
        comm_kernel_mask=comm_k,
    )


def step_breakdowns(r: Roles, steps: Steps) -> list[StepBreakdown]:
    """One breakdown per step, in µs, parts summing to the step's duration."""
    n = len(steps)
    if n == 0:
        return []
    sets = r.in_priority()
    bounds = unique(np.concatenate([steps.starts_ns, steps.ends_ns, *[x.starts for x in sets],
                                       *[x.ends for x in sets]]))
    left, right = bounds[:-1], bounds[1:]
    step_of = np.searchsorted(steps.starts_ns, left, side="right") - 1
    in_step = step_of >= 0
    in_step[in_step] = left[in_step] < steps.ends_ns[step_of[in_step]]
    all_left = left
    left, length, step_of = left[in_step], (right - bounds[:-1])[in_step], step_of[in_step]
    claimed = np.zeros(left.size, dtype=bool)
    totals = np.zeros((len(sets) + 1, n), dtype=np.float64)
    for i, s in enumerate(sets):
        mine = (_covering(s, bounds) if is_merged(s) else covers(s, all_left))[in_step] & ~claimed
        totals[i] = np.bincount(step_of[mine], weights=length[mine], minlength=n)
        claimed |= mine
    totals[-1] = np.bincount(step_of[~claimed], weights=length[~claimed], minlength=n)
    totals /= 1000.0
    return [StepBreakdown(*(float(x) for x in totals[:, j])) for j in range(n)]


def _covering(s: Intervals, bounds: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Whether ``s`` (merged, its starts and ends all among the sorted ``bounds``) covers each piece between two
    bounds: one step into an interval at each start, one out at each end, summed along (``covers`` of the pieces'
    left ends, without a binary search per piece)."""
    step = np.zeros(bounds.size, dtype=np.int8)
    step[np.searchsorted(bounds, s.starts)] = 1
    step[np.searchsorted(bounds, s.ends)] = -1
    return np.cumsum(step[:-1], dtype=np.int8) > 0


def mean_breakdown(parts: list[StepBreakdown]) -> StepBreakdown:
    if not parts:
        return StepBreakdown()
    cols = np.array([[p.kernel, p.memcpy, p.memset, p.communication, p.runtime, p.dataloader, p.cpu_exec,
                      p.other] for p in parts])
    return StepBreakdown(*(float(x) for x in cols.mean(axis=0)))
