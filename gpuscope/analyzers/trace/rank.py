"""Everything one rank's trace says, as a RankReport: window, steps, breakdowns, communication, memory, kernels.

Step figures, the breakdown and GPU busy cover the steady window: the profiler steps less the warm-up ones
(mostly start-up: lazy CUDA initialisation, torch.compile, CUDA-graph capture), or without profiler steps
the window after the start-up that opens it. The step time is ``step_stats.step_time_us`` of the steady steps,
the one statistic every view of a step uses (the mean, slow steps included). Holistic Trace Analysis' temporal
and idle breakdowns keep its definition: the whole window.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace import breakdown, gpu, kernels, memory, queue
from gpuscope.analyzers.trace.collectives import collective_stats
from gpuscope.analyzers.trace.host_idle import host_in_gpu_idle
from gpuscope.analyzers.trace.intervals import clip, merge, subtract, union
from gpuscope.analyzers.trace.profile import rank_profile
from gpuscope.analyzers.trace.startup import StartupSpans, StepPlan, plan_steps
from gpuscope.analyzers.trace.step_causes import slow_steps
from gpuscope.analyzers.trace.step_stats import step_stats, step_time_us
from gpuscope.analyzers.trace.steps import Steps, launched_gpu_events
from gpuscope.analyzers.trace.workload import workload
from gpuscope.model.rank import Communication, DeviceBusy, RankReport, Startup, StepBreakdown, StepRecord
from gpuscope.model.trace import GPU_KINDS, RankTrace

SKEW_NS = 5_000
"""GPU work starting more than 5 µs before the host call that launched it: the two clocks disagree."""
SKEW_MIN_SHARE = 0.1
"""Clocks are called out of step when at least this share of launched GPU events starts before its launch."""


def analyze_rank(trace: RankTrace, *, plan: StepPlan | None = None,
                 roles: breakdown.Roles | None = None) -> RankReport:
    """Everything the rank's trace says. ``plan`` and ``roles`` (``plan_steps`` and ``breakdown.roles`` of the
    same trace), when the caller has them already."""
    plan = plan if plan is not None else plan_steps(trace)
    steps, warm, steady, spans = plan.steps, plan.warmup, plan.steady, plan.startup
    roles = roles if roles is not None else breakdown.roles(trace)
    start, end = steps.window_ns
    if steps.from_profiler:
        all_parts = breakdown.step_breakdowns(roles, steps)
        per_step = tuple(
            StepRecord(name=name, start_us=(int(s) - start) / 1000, duration_us=(int(e) - int(s)) / 1000,
                       breakdown_us=part, gpu_busy=gpu.busy_share(roles, int(s), int(e)), warmup=bool(w))
            for name, s, e, part, w in zip(steps.names, steps.starts_ns, steps.ends_ns, all_parts, warm))
        parts = all_parts if steady is None else steady_breakdowns(roles, steps, warm, steady, all_parts)
    else:
        per_step = ()
        parts = (breakdown.step_breakdowns(roles, steady) if steady is not None else []) \
            or breakdown.step_breakdowns(roles, steps)
    s0, s1 = steady.window_ns if steady is not None else (start, end)
    skew = clock_skew_us(trace)
    steady_steps = [p for p in per_step if not p.warmup] or list(per_step)
    stats = step_stats([p.duration_us for p in steady_steps])
    steady_mask = np.array([not p.warmup for p in per_step], dtype=bool)
    devices = device_busy(trace, s0, s1)
    kind, why = workload(trace)
    return RankReport(
        rank=trace.rank,
        window_us=(end - start) / 1000,
        steps=len(steady_steps),
        step_time_us=step_time_us([p.duration_us for p in steady_steps]),
        gpu_busy=_mean_busy(devices) if len(devices) > 1 else gpu.busy_share(roles, s0, s1),
        step_breakdown_us=breakdown.mean_breakdown(parts),
        temporal=gpu.temporal(roles, start, end),
        idle_breakdown_us=gpu.idle_breakdown(trace, roles, start, end) if skew is None else None,
        communication=communication(trace, roles, s0, s1),
        memory=memory.device_memory(trace),
        launch=kernels.launch_stats(trace, attribute=skew is None),
        top_kernels=kernels.top_kernels(trace, roles.comm_kernel_mask),
        per_step=per_step,
        kernel_utilization=kernel_utilization(roles, steady if steady is not None else steps),
        sm_efficiency=kernels.sm_efficiency(trace, s0, s1),
        device=_device_name(trace),
        source=trace.source,
        devices=devices,
        startup=_startup(spans, start, end, int(warm.sum()), steady is not None),
        steady_window_us=(s1 - s0) / 1000,
        clock_skew_us=skew,
        world_size=trace.world_size,
        workload=kind,
        workload_evidence=why,
        profile=rank_profile(trace, steady if steady is not None else steps, roles.comm_kernel_mask),
        cpu_only=not trace.gpu_active,
        step_time_median_us=stats.median_us if stats is not None else None,
        step_time_p90_us=stats.p90_us if stats is not None else None,
        step_time_spread_us=stats.spread_us if stats is not None else None,
        slow_steps=slow_steps(trace, steps, steady_mask if steady_mask.any() else ~steady_mask) if per_step else (),
        host_in_gpu_idle=host_in_gpu_idle(trace, roles, s0, s1) if trace.gpu_active else (),
        queue=queue.launch_queue(trace) if skew is None else None,
        filling_call=queue.filling_call(trace, roles.gpu_any, s0, s1) if trace.gpu_active else None,
        step_source=steps.source if steps.from_profiler and len(steps) else None,
    )


def steady_breakdowns(roles: breakdown.Roles, steps: Steps, warm: npt.NDArray[np.bool_], steady: Steps,
                  all_parts: list[StepBreakdown]) -> list[StepBreakdown]:
    """The breakdowns of the steady steps (the profiler steps less the warm-up ones, ``warm``). Where no two steps
    overlap, each step's breakdown is its own time alone, whichever other steps are broken down with it: those of
    every step are taken as they are (the same numbers, bit for bit). Steps that overlap (a step's GPU work running
    past the next one's start) split their shared time by which steps there are, so the steady ones are broken down
    on their own."""
    if bool((steps.ends_ns[:-1] <= steps.starts_ns[1:]).all()):
        return [part for part, w in zip(all_parts, warm.tolist()) if not w]
    return breakdown.step_breakdowns(roles, steady)


def _startup(spans: StartupSpans, start: int, end: int, warm: int, steady: bool) -> Startup | None:
    inside = clip(spans.intervals, start, end).total
    if inside == 0:
        return None
    return Startup(duration_us=inside / 1000, parts_us={k: v / 1000 for k, v in spans.parts_ns.items()},
                   calls=spans.calls, warmup_steps=warm, steady=steady)


def device_busy(trace: RankTrace, start_ns: int, end_ns: int) -> tuple[DeviceBusy, ...]:
    """Busy share of each device the rank ran GPU work on, over the window."""
    ev = trace.events
    on_gpu = ev.mask(*GPU_KINDS) & (ev.device >= 0)
    models = {g.index: g.name for g in trace.gpus}
    out = []
    for d in np.unique(ev.device[on_gpu]).tolist():
        sel = on_gpu & (ev.device == d)
        busy = clip(merge(ev.ts_ns[sel], ev.end_ns[sel]), start_ns, end_ns).total
        out.append(DeviceBusy(device=int(d), busy=busy / (end_ns - start_ns) if end_ns > start_ns else None,
                              model=models.get(int(d))))
    return tuple(out)


def _mean_busy(devices: tuple[DeviceBusy, ...]) -> float | None:
    known = [d.busy for d in devices if d.busy is not None]
    return sum(known) / len(known) if known else None


def clock_skew_us(trace: RankTrace) -> float | None:
    """The median lead of GPU events over their launch calls, when many start before the call: host and GPU
    timestamps then come from clocks that disagree (CUPTI/roctracer without clock sync, merged traces)."""
    rt, dev = launched_gpu_events(trace)
    if dev.size == 0:
        return None
    lead = trace.events.ts_ns[rt] - trace.events.ts_ns[dev]
    early = lead > SKEW_NS
    if early.mean() < SKEW_MIN_SHARE:
        return None
    return float(np.median(lead[early])) / 1000


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
                         overlap=(total - exposed) / total if total else None, kernels=count,
                         collectives=collective_stats(trace, roles.comm_kernel_mask, start_ns, end_ns))


def _device_name(trace: RankTrace) -> str | None:
    gpu = trace.main_gpu()
    return gpu.name if gpu is not None else None
