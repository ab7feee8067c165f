"""Evidence the diagnosis reads from a rank's raw events, beyond what its RankReport already holds.

Each figure is something a user can find in the trace themselves: host time blocked in collective
waits, the names of host-device syncs, ``.item()`` calls, GPU gaps after syncs, long GPU gaps and
low-utilisation chunks (the ``nsys analyze`` rules), tensor-core eligible kernel time (the TensorBoard
plugin's AMP rule), optimizer-step host time and the DataLoader's mode.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpuscope.analyzers.trace import breakdown, classify, queue
from gpuscope.analyzers.trace.intervals import EMPTY, Intervals, clip, covers, merge, subtract, union
from gpuscope.analyzers.trace.rank import clock_skew_us
from gpuscope.analyzers.trace.startup import StepPlan, plan_steps
from gpuscope.analyzers.trace.steps import Steps, launched_gpu_events
from gpuscope.model.trace import Kind, Precision, RankTrace

LONG_GAP_NS = 500_000_000
"""Nsight Systems' ``gpu_gaps`` rule: a GPU gap over 500 ms."""
CHUNKS = 30
"""Nsight Systems' ``gpu_time_util`` rule: utilization under 50% in any of 30 equal chunks."""
LOW_UTIL = 0.5

# Host ranges that their sources name as a wait on a collective that no GPU kernel shows (each matched whole):
# - torchrec Awaitable.wait(): record_function(f"## {type(self).__name__} wait() ##")
#   (torchrec/distributed/types.py); NoWait returns at once and is left out;
# - torchrec comm_ops' autograd functions whose forward waits on an all-to-all / reduce-scatter / all-gather
#   request: All2All_Pooled_Wait, All2All_Seq_Req_Wait, All2Allv_Wait, ReduceScatter_Wait, ReduceScatterBase_Wait,
#   ReduceScatterV_Wait, AllGatherBase_Wait (torchrec/distributed/comm_ops.py);
# - torchrec TrainPipelineSparseDist's "## wait_sparse_data_dist ##" (torchrec/distributed/train_pipeline);
# - functional collectives' wait_tensor (torch.distributed._functional_collectives: the ops
#   _c10d_functional::wait_tensor and c10d_functional::wait_tensor) and c10d's work wait (c10d::wait).
# Ranges that launch collectives (All2All_Pooled_Req, "## alltoall_fwd_single ##", "## all2all_data:... ##") are
# not waits: their time is host work, and the collective itself shows as a GPU kernel.
_COLLECTIVE_WAIT = re.compile(
    r"^## (?!NoWait )\w+ wait\(\) ##$"
    r"|^(?:All2All_Pooled|All2All_Seq_Req|All2Allv|ReduceScatter|ReduceScatterBase|ReduceScatterV|AllGatherBase)_Wait$"
    r"|^## wait_sparse_data_dist ##$"
    r"|^_?c10d_functional::wait_tensor$|^c10d::wait$"
)
# The TensorBoard plugin's tensor-core eligible operators (autocast's fp16 list and their backward ops).
_TC_OPS = re.compile(
    r"^aten::(?:_convolution|conv1d|conv2d|conv3d|conv_tbc|conv_transpose[123]d|convolution|cudnn_convolution\w*"
    r"|prelu|addmm_?|addmv|addr|matmul|mm|mv|linear|addbmm|baddbmm|bmm|chain_matmul|linalg_multi_dot"
    r"|_thnn_fused_(?:lstm|gru)_cell|lstm_cell|gru_cell|rnn_tanh_cell|rnn_relu_cell)$"
    r"|^(?:CudnnConvolution(?:Transpose)?Backward|BmmBackward|MmBackward|AddmmBackward|LinearBackward"
    r"|ConvolutionBackward)\d*$"
)
_ITEM_OP = "aten::_local_scalar_dense"
"""Where every .item() (and bool()/int() of a CUDA tensor) copies the scalar back and waits for the GPU."""
# torch.nn.DataParallel: its forward range and the autograd functions it replicates with (torch/nn/parallel/
# _functions.py: Broadcast, ReduceAddCoalesced). DistributedDataParallel and FullyShardedDataParallel are not it.
_SYNC_COPIES = frozenset({"cudaMemcpy", "cudaMemset", "hipMemcpy", "hipMemset"})
"""The runtimes' synchronous copy and set (Nsight Systems' "synchronous memcpy/memset" rule), on CUDA and HIP."""
_DATA_PARALLEL = re.compile(r"^DataParallel\.forward$|^Broadcast$|^ReduceAddCoalesced$")
# Fused optimizer kernels' host ops (torch.optim with fused=True) and apex/DeepSpeed fused optimizers.
_FUSED_OPTIMIZER_OP = re.compile(r"^aten::_fused_(?:adam|adamw|sgd|adagrad)_?$|^Optimizer\.step#Fused")


@dataclass(frozen=True)
class TraceEvidence:
    """What one rank's events say beyond its RankReport. Per-step figures are means over the steps."""

    rank: int
    collective_wait_us: float = 0.0
    """Per step: host time in collective waits that no GPU event, collective op or DataLoader covers."""
    comm_exposed_us: float = 0.0
    """Per step: collective kernel time no compute kernel hides (``Communication.exposed_us``'s measure, per
    step)."""
    allreduce_exposed_us: float = 0.0
    """Per step: the all-reduce kernels' part of ``comm_exposed_us`` (what gradient accumulation and compression
    shrink); all-reduces hidden under the backward pass cost the step nothing."""
    sync_calls: tuple[tuple[str, int], ...] = ()
    """Host-device synchronisation calls by name, most frequent first."""
    item_calls: int = 0
    """``.item()``-style calls (aten::_local_scalar_dense) on device tensors: each one waits for the GPU. One on a CPU
    tensor (torch.optim's single-tensor step counter, say) calls no runtime API and is not counted."""
    sync_drain_us: float = 0.0
    """Per step: GPU idle from the end of each sync until the next GPU work (outside the DataLoader)."""
    sync_memcpy: int = 0
    """Synchronous cudaMemcpy / cudaMemset calls (Nsight Systems flags these)."""
    long_gaps: int = 0
    long_gap_us: float = 0.0
    idle_gap_us: float = 0.0
    """The part of the long gaps when the host was in no traced call either (no runtime call, operator, DataLoader
    or collective): plain idle."""
    idle_gap_by_step_us: tuple[tuple[str, float], ...] = ()
    """``idle_gap_us`` by profiler step: (step name, µs) for each step holding some; empty without profiler steps."""
    gpu_wait_us: float = 0.0
    """The GPU-side wait in the analysed steps (``analyzers.trace.queue``: work launched but queued, or no host
    activity to blame), less what the DataLoader, collectives and collective waits hold: GPU idle time in the host
    categories that the host did not cause. µs over the steps, not per step, like ``idle_gap_us``; 0 when the host
    and GPU clocks disagree (``clock_skew_us``)."""
    gpu_wait_by_step_us: tuple[tuple[str, float], ...] = ()
    """``gpu_wait_us`` by step: (step name, µs) for each step holding some; empty without steps."""
    collective_wait_by_step_us: tuple[tuple[str, float], ...] = ()
    """The collective waits by profiler step: (step name, µs, not per step) for each step holding some."""
    low_util_chunks: int | None = None
    """Of 30 equal chunks of the window, how many had the GPU busy under 50%; None when too short."""
    tc_eligible_share: float | None = None
    """Share of kernel time launched by tensor-core eligible operators that ran neither on tensor cores nor in a
    type below fp32 (by the op's recorded input types, else the kernel's name): what AMP or TF32 would speed up."""
    tc_share: float | None = None
    """Share of kernel time in kernels that ran on tensor cores."""
    low_precision_share: float | None = None
    """Share of eligible kernel time already in fp16/bf16/fp8 (inputs or kernel names)."""
    graph_kernel_share: float | None = None
    """Share of kernels launched by CUDA/HIP graph replays (cudaGraphLaunch): the job already uses graphs."""
    optimizer_fused: bool = False
    """The optimizer step runs fused kernels (torch.optim fused=True, apex/DeepSpeed Fused*)."""
    optimizer_foreach: bool = False
    """The optimizer step runs multi-tensor (aten::_foreach_*) ops."""
    optimizer_step_us: float = 0.0
    """Per step: host time in ``Optimizer.step``."""
    optimizer: str | None = None
    dataloader_mode: Literal["single", "multi"] | None = None
    data_parallel: bool = False
    compute_capability: str | None = None
    backend: str | None = None
    """The process group's backend (nccl, gloo, ...) from the trace's distributedInfo."""


def trace_evidence(trace: RankTrace, *, plan: StepPlan | None = None,
                   roles: breakdown.Roles | None = None) -> TraceEvidence:
    """Everything the diagnosis reads from one rank's events. ``plan`` and ``roles`` (``plan_steps`` and
    ``breakdown.roles`` of the same trace), when the caller has them already."""
    steps = (plan if plan is not None else plan_steps(trace)).analysed
    roles = roles if roles is not None else breakdown.roles(trace)
    n = max(len(steps), 1)
    start, end = steps.window_ns
    gaps = _gpu_gaps(roles, start, end)
    side = queue.side_wait_in(trace, gaps).intervals if clock_skew_us(trace) is None else EMPTY
    long = gaps.ends - gaps.starts >= LONG_GAP_NS
    # A gap in which the host is inside a runtime call or an operator is the host's time, never idle; the GPU-side
    # wait is neither.
    idle = subtract(Intervals(gaps.starts[long], gaps.ends[long]),
                    union(roles.dataloader, roles.communication, roles.runtime, roles.cpu_exec, side))
    waits = _collective_waits(trace, roles)
    gpu_wait = subtract(side, union(roles.dataloader, roles.communication, waits))
    eligible, tc, low = _tensor_core_shares(trace)
    allreduce_ns, comm_ns = _exposed_collectives_ns(trace, roles, steps)
    return TraceEvidence(
        rank=trace.rank,
        collective_wait_us=_in_steps(waits, steps) / 1000 / n,
        collective_wait_by_step_us=_by_step(waits, steps) if steps.from_profiler else (),
        comm_exposed_us=comm_ns / 1000 / n,
        allreduce_exposed_us=allreduce_ns / 1000 / n,
        sync_calls=_sync_calls(trace),
        item_calls=_device_item_calls(trace),
        sync_drain_us=clip(subtract(_sync_drains(trace, roles, start, end), union(roles.dataloader, side)), start,
                           end).total / 1000 / n,
        sync_memcpy=int(trace.name_mask(lambda s: s in _SYNC_COPIES, Kind.RUNTIME).sum()),
        long_gaps=int(long.sum()),
        long_gap_us=float((gaps.ends - gaps.starts)[long].sum()) / 1000,
        idle_gap_us=idle.total / 1000,
        idle_gap_by_step_us=_by_step(idle, steps) if steps.from_profiler else (),
        gpu_wait_us=gpu_wait.total / 1000,
        gpu_wait_by_step_us=_by_step(gpu_wait, steps) if steps.from_profiler else (),
        low_util_chunks=_low_util_chunks(roles, start, end),
        tc_eligible_share=eligible,
        tc_share=tc,
        low_precision_share=low,
        graph_kernel_share=_graph_kernel_share(trace),
        optimizer_fused=bool(trace.name_mask(lambda s: _FUSED_OPTIMIZER_OP.search(s) is not None, *_HOST).any()),
        optimizer_foreach=bool(trace.name_mask(lambda s: s.startswith("aten::_foreach_"), Kind.CPU_OP).any()),
        optimizer_step_us=_named_host_ns(trace, lambda s: s.startswith("Optimizer.step#"), steps) / 1000 / n,
        optimizer=_optimizer_name(trace),
        dataloader_mode=_dataloader_mode(trace),
        data_parallel=bool(trace.name_mask(lambda s: _DATA_PARALLEL.search(s) is not None, *_HOST).any()),
        compute_capability=next((g.compute_capability for g in trace.gpus if g.compute_capability), None),
        backend=trace.backend,
    )


_HOST = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)


def _in_steps(x: Intervals, steps: Steps) -> int:
    return sum(clip(x, int(s), int(e)).total for s, e in zip(steps.starts_ns, steps.ends_ns))


def _by_step(x: Intervals, steps: Steps) -> tuple[tuple[str, float], ...]:
    """(step name, µs of ``x`` inside it) for each step ``x`` reaches into."""
    parts = ((name, clip(x, int(s), int(e)).total) for name, s, e in zip(steps.names, steps.starts_ns, steps.ends_ns))
    return tuple((name, ns / 1000) for name, ns in parts if ns > 0)


def _collective_waits(trace: RankTrace, r: breakdown.Roles) -> Intervals:
    """Host time in collective waits that no GPU event, collective op or DataLoader covers."""
    ev = trace.events
    waits = trace.name_mask(lambda s: _COLLECTIVE_WAIT.search(s) is not None, *_HOST)
    if not waits.any():
        return EMPTY
    return subtract(merge(ev.ts_ns[waits], ev.end_ns[waits]),
                    union(r.kernel, r.memcpy, r.memset, r.communication, r.dataloader))


def _exposed_collectives_ns(trace: RankTrace, r: breakdown.Roles, steps: Steps) -> tuple[int, int]:
    """(all-reduce, all collectives) kernel time inside the steps that no compute kernel overlaps."""
    ev = trace.events
    allreduce = r.comm_kernel_mask & trace.name_mask(classify.is_allreduce_kernel, Kind.KERNEL)
    hidden_by = r.kernel
    exposed_allreduce = subtract(merge(ev.ts_ns[allreduce], ev.end_ns[allreduce]), hidden_by)
    return _in_steps(exposed_allreduce, steps), _in_steps(subtract(r.comm_kernels, hidden_by), steps)


def _named_host_ns(trace: RankTrace, predicate: Callable[[str], bool], steps: Steps) -> int:
    ev = trace.events
    sel = trace.name_mask(predicate, *_HOST)
    return _in_steps(merge(ev.ts_ns[sel], ev.end_ns[sel]), steps) if sel.any() else 0


def _device_item_calls(trace: RankTrace) -> int:
    """``.item()`` calls that reached the device: those with a runtime call (the copy back, the stream sync) inside
    them on their own thread."""
    ev = trace.events
    items = np.flatnonzero(trace.name_mask(lambda s: s == _ITEM_OP, Kind.CPU_OP))
    if len(items) == 0:
        return 0
    runtime = np.flatnonzero(ev.kind == Kind.RUNTIME)
    found = 0
    for tid in np.unique(ev.tid[items]).tolist():
        starts = np.sort(ev.ts_ns[runtime[ev.tid[runtime] == tid]], kind="stable")
        mine = items[ev.tid[items] == tid]
        if len(starts) == 0:
            continue
        first = np.searchsorted(starts, ev.ts_ns[mine], side="left")
        inside = first < len(starts)
        inside[inside] = starts[first[inside]] < ev.end_ns[mine][inside]
        found += int(inside.sum())
    return found


def _sync_calls(trace: RankTrace) -> tuple[tuple[str, int], ...]:
    ev = trace.events
    sync = trace.name_mask(classify.is_sync_runtime, Kind.RUNTIME)
    counts = Counter(trace.names[i] for i in ev.name_id[sync].tolist())
    return tuple(counts.most_common())


def _sync_drains(trace: RankTrace, r: breakdown.Roles, start: int, end: int) -> Intervals:
    """After a full sync the GPU queue is empty: the GPU idles from the end of each sync in [start, end) until the
    host launches again (the GPU-side wait in it is not the sync's doing: the caller takes it out)."""
    ev = trace.events
    sync = trace.name_mask(classify.is_sync_runtime, Kind.RUNTIME)
    if not sync.any() or len(r.gpu_any) == 0:
        return EMPTY
    sync_end = ev.end_ns[sync]
    nxt = np.searchsorted(r.gpu_any.starts, sync_end, side="left")
    ok = (nxt < len(r.gpu_any)) & (sync_end >= start) & (sync_end < end) & ~covers(r.gpu_any, sync_end)
    return merge(sync_end[ok], r.gpu_any.starts[nxt[ok]])


def _gpu_gaps(r: breakdown.Roles, start: int, end: int) -> Intervals:
    if end <= start:
        return EMPTY
    whole = Intervals(np.array([start], np.int64), np.array([end], np.int64))
    return subtract(whole, clip(r.gpu_any, start, end))


def _low_util_chunks(r: breakdown.Roles, start: int, end: int) -> int | None:
    if len(r.gpu_any) == 0 or end - start < CHUNKS * 1000:
        return None
    edges = np.linspace(start, end, CHUNKS + 1).astype(np.int64)
    busy = [clip(r.gpu_any, int(a), int(b)).total / max(int(b) - int(a), 1) for a, b in zip(edges[:-1], edges[1:])]
    return int(sum(1 for x in busy if x < LOW_UTIL))


def _tensor_core_shares(trace: RankTrace) -> tuple[float | None, float | None, float | None]:
    """Shares of kernel time: eligible for AMP/TF32 (launched on the launching thread from inside a tensor-core
    eligible op, not on tensor cores, not below fp32), on tensor cores, and eligible but already low precision."""
    ev = trace.events
    kern = np.flatnonzero(ev.kind == Kind.KERNEL)
    total = float(ev.dur_ns[kern].sum())
    if total <= 0:
        return None, None, None
    on_tc = trace.name_mask(classify.is_tensor_core_kernel, Kind.KERNEL)
    tc = float(ev.dur_ns[on_tc].sum()) / total
    ops = trace.name_mask(lambda s: _TC_OPS.search(s) is not None, Kind.CPU_OP)
    rt, dev = launched_gpu_events(trace)
    is_kernel = ev.kind[dev] == Kind.KERNEL
    rt, dev = rt[is_kernel], dev[is_kernel]
    eligible = np.zeros(rt.size, dtype=bool)
    low = trace.name_mask(classify.is_low_precision_kernel, Kind.KERNEL)[dev]
    for tid in np.unique(ev.tid[rt]).tolist():
        mine = np.flatnonzero(ev.tid[rt] == tid)
        sel = np.flatnonzero(ops & (ev.tid == tid))
        if sel.size == 0:
            continue
        # The innermost eligible op around each launch (ops are sorted by start; nesting means the latest
        # start before the launch that is still open encloses it).
        at = np.searchsorted(ev.ts_ns[sel], ev.ts_ns[rt[mine]], side="right") - 1
        ok = at >= 0
        ok[ok] = ev.end_ns[sel[at[ok]]] >= ev.ts_ns[rt[mine[ok]]]
        eligible[mine] = covers(merge(ev.ts_ns[sel], ev.end_ns[sel]), ev.ts_ns[rt[mine]])
        half = np.zeros(mine.size, dtype=bool)
        half[ok] = np.isin(ev.precision[sel[at[ok]]], _LOW_PRECISION)
        low[mine] |= half
    usable = eligible & ~on_tc[dev] & ~low
    already = eligible & ~on_tc[dev] & low
    return (float(ev.dur_ns[dev[usable]].sum()) / total, tc, float(ev.dur_ns[dev[already]].sum()) / total)


_LOW_PRECISION = np.array([Precision.HALF, Precision.BF16, Precision.FP16, Precision.FP8, Precision.INT8],
                          dtype=np.uint8)


def _graph_kernel_share(trace: RankTrace) -> float | None:
    rt, dev = launched_gpu_events(trace)
    kernels = trace.events.kind[dev] == Kind.KERNEL
    if not kernels.any():
        return None
    graphed = trace.name_mask(classify.is_graph_launch, Kind.RUNTIME)[rt[kernels]]
    return float(graphed.mean())


def _optimizer_name(trace: RankTrace) -> str | None:
    for name in trace.names:
        if name.startswith("Optimizer.step#"):
            return name.removeprefix("Optimizer.step#").split(".")[0]
    return None


def _dataloader_mode(trace: RankTrace) -> Literal["single", "multi"] | None:
    names = [n for n in trace.names if classify.is_dataloader_op(n)]
    if any("MultiProcessing" in n for n in names):
        return "multi"
    return "single" if any("SingleProcess" in n for n in names) else None

