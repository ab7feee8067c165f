"""Everything one rank's trace says, as a RankReport: window, steps, breakdowns, communication, memory, kernels."""

from __future__ import annotations

import numpy as np

from gpuscope.analyzers import breakdown, gpu, kernels, memory
from gpuscope.analyzers.intervals import clip, subtract, union
from gpuscope.analyzers.steps import Steps, find_steps
from gpuscope.model.report import Communication, RankReport, StepRecord
from gpuscope.model.trace import RankTrace


def analyze_rank(trace: RankTrace) -> RankReport:
    steps = find_steps(trace)
    roles = breakdown.roles(trace)
    start, end = steps.window_ns
    parts = breakdown.step_breakdowns(roles, steps)
    per_step = tuple(
        StepRecord(name=name, start_us=(int(s) - start) / 1000, duration_us=(int(e) - int(s)) / 1000,
                   breakdown_us=part, gpu_busy=gpu.busy_share(roles, int(s), int(e)))
        for name, s, e, part in zip(steps.names, steps.starts_ns, steps.ends_ns, parts)
    )
    step_time_us = float(np.mean([p.duration_us for p in per_step])) if per_step else 0.0
    device = _device_name(trace)
    return RankReport(
        rank=trace.rank,
        window_us=(end - start) / 1000,
        steps=len(steps),
        step_time_us=step_time_us,
        gpu_busy=gpu.busy_share(roles, start, end),
        step_breakdown_us=breakdown.mean_breakdown(parts),
        temporal=gpu.temporal(roles, start, end),
        idle_breakdown_us=gpu.idle_breakdown(trace, roles, start, end),
        communication=communication(trace, roles, start, end),
        memory=memory.device_memory(trace),
        launch=kernels.launch_stats(trace),
        top_kernels=kernels.top_kernels(trace, roles.comm_kernel_mask),
        per_step=per_step,
        kernel_utilization=kernel_utilization(roles, steps),
        sm_efficiency=kernels.sm_efficiency(trace, start, end),
        device=device,
        source=trace.source,
    )


def kernel_utilization(roles: breakdown.Roles, steps: Steps) -> float | None:
    """The TensorBoard plugin's "GPU Utilization": time any kernel ran, within the steps, over the steps."""
    steps_ns = int((steps.ends_ns - steps.starts_ns).sum()) if len(steps) else 0
    kernels = union(roles.kernel, roles.comm_kernels)
    if steps_ns <= 0 or len(kernels) == 0:
        return None
    busy = sum(clip(kernels, int(s), int(e)).total for s, e in zip(steps.starts_ns, steps.ends_ns))
    return busy / steps_ns


def communication(trace: RankTrace, roles: breakdown.Roles, start_ns: int, end_ns: int) -> Communication:
    """Collective kernels in the window: total, exposed (not under a compute kernel), and overlap."""
    comm = clip(roles.comm_kernels, start_ns, end_ns)
    total = comm.total
    exposed = subtract(comm, roles.kernel).total
    ev = trace.events
    count = int((roles.comm_kernel_mask & (ev.ts_ns < end_ns) & (ev.end_ns > start_ns)).sum())
    return Communication(total_us=total / 1000, exposed_us=exposed / 1000,
                         overlap=(total - exposed) / total if total else None, kernels=count)


def _device_name(trace: RankTrace) -> str | None:
    gpu = trace.main_gpu()
    return gpu.name if gpu is not None else None
