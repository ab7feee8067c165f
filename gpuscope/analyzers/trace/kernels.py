"""Kernels: the top ones by time, launch delays, tiny kernels, syncs and pageable copies."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace import classify
from gpuscope.analyzers.trace.queue import kernel_latency_ns
from gpuscope.model.rank import KernelStat, LaunchStats
from gpuscope.model.trace import Kind, RankTrace

SHORT_KERNEL_US = 10.0


def top_kernels(trace: RankTrace, comm_mask: npt.NDArray[np.bool_], *, limit: int = 15) -> tuple[KernelStat, ...]:
    ev = trace.events
    kern = ev.kind == Kind.KERNEL
    if not kern.any():
        return ()
    ids = ev.name_id[kern]
    dur = ev.dur_ns[kern].astype(np.float64)
    total = np.bincount(ids, weights=dur, minlength=len(trace.names))
    count = np.bincount(ids, minlength=len(trace.names))
    comm_ids = set(np.unique(ev.name_id[kern & comm_mask]).tolist())
    grand = float(dur.sum()) or 1.0
    order = np.argsort(-total, kind="stable")[:limit]  # equal totals: the kernel the trace names first
    out = []
    for i in order:
        if count[i] == 0:
            break
        name = trace.names[i]
        is_comm = int(i) in comm_ids
        tc = None if is_comm else classify.is_tensor_core_kernel(name)
        out.append(KernelStat(name=name, count=int(count[i]), total_us=float(total[i]) / 1000,
                              mean_us=float(total[i]) / int(count[i]) / 1000, share=float(total[i]) / grand,
                              category="communication" if is_comm else "compute", tensor_core=tc))
    return tuple(out)


def launch_stats(trace: RankTrace, *, attribute: bool = True) -> LaunchStats | None:
    """Kernel launch figures; with ``attribute=False`` (host and GPU clocks disagree) no launch delays."""
    ev = trace.events
    kern = ev.kind == Kind.KERNEL
    n = int(kern.sum())
    if n == 0:
        return None
    # A kernel may start before its launch call returns (the call's own tail runs after the submission): no
    # queueing at all, a delay of 0, as Holistic Trace Analysis clips it, never a negative wait.
    delay_us = kernel_latency_ns(trace)[0] / 1000.0 if attribute else np.empty(0)
    dur_us = ev.dur_ns[kern] / 1000.0
    sync = trace.name_mask(classify.is_sync_runtime, Kind.RUNTIME)
    pageable = trace.name_mask(classify.is_pageable_memcpy, Kind.MEMCPY)
    return LaunchStats(
        kernels=n,
        launch_delay_median_us=float(np.median(delay_us)) if delay_us.size else None,
        launch_delay_p95_us=float(np.percentile(delay_us, 95)) if delay_us.size else None,
        short_kernel_share=float((dur_us < SHORT_KERNEL_US).mean()),
        short_kernel_us=SHORT_KERNEL_US,
        kernel_median_us=float(np.median(dur_us)),
        sync_calls=int(sync.sum()),
        sync_us=float(ev.dur_ns[sync].sum()) / 1000,
        pageable_memcpy=int(pageable.sum()),
        pageable_memcpy_us=float(ev.dur_ns[pageable].sum()) / 1000,
    )


def sm_efficiency(trace: RankTrace, start_ns: int, end_ns: int) -> float | None:
    """The TensorBoard plugin's Est. SM Efficiency: min(blocks per SM, 1), kernel-time weighted, over the window."""
    ev = trace.events
    kern = (ev.kind == Kind.KERNEL) & (ev.ts_ns >= start_ns) & (ev.end_ns <= end_ns)
    bps = ev.blocks_per_sm[kern]
    known = ~np.isnan(bps)
    if not known.any() or end_ns <= start_ns:
        return None
    dur = ev.dur_ns[kern][known].astype(np.float64)
    return float((np.minimum(bps[known], 1.0) * dur).sum() / (end_ns - start_ns))
