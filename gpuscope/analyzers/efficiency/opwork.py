"""FLOPs, bytes and the roofline per operator, for `gpuscope ops`: over every call of each operator in the trace,
as the operator table counts its calls and times.

A call of an operator this package models is counted at its own inputs (``aten::addmm`` inside ``aten::linear``
has the same FLOPs as the linear: the view shows each operator's work, the run's total counts it once). A call
of one it does not model (a module's annotation, ``autograd::engine::evaluate_function: ...``) sums the counted
calls inside it. Achieved FLOP/s is over the calls' GPU total time (their kernels and those of everything nested
in them), the operator table's own figure; the roofline is at the operator's own type's peak.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.efficiency.count import TF32_KERNEL
from gpuscope.analyzers.efficiency.nodes import NodeCosts, node_costs
from gpuscope.analyzers.efficiency.roofline import roofline_point
from gpuscope.analyzers.trace.ops import NodeTimes, is_operator, node_times
from gpuscope.analyzers.trace.optree import CallTree
from gpuscope.model.efficiency import OpWork
from gpuscope.model.gpu_spec import DTYPES, GpuSpec
from gpuscope.model.trace import Kind, RankTrace

F64 = npt.NDArray[np.float64]


def op_work(trace: RankTrace, tree: CallTree, spec: GpuSpec | None, *,
            times: NodeTimes | None = None) -> dict[str, OpWork]:
    """Operator name -> its counted work and roofline; operators with no counted call are left out."""
    if not trace.shapes or not len(tree):
        return {}
    nodes = node_costs(trace, tree)
    times = times if times is not None else node_times(trace, tree)
    ev = trace.events
    calls = tree.kept & trace.name_mask(is_operator, Kind.CPU_OP)[tree.event]
    own = nodes.cost_id >= 0
    dtypes, by_dtype = _dtype_columns(trace, nodes)
    counted = nodes.counted
    inside = _subtree_sums(tree, np.column_stack([np.where(counted[:, None], by_dtype, 0.0),
                                                  np.where(counted, nodes.bytes(), 0.0),
                                                  counted.astype(np.float64)]))
    work = np.where(own[:, None], np.column_stack([by_dtype, nodes.bytes()]), inside[:, :-1])
    known = calls & (own | (inside[:, -1] > 0))
    idx = np.flatnonzero(known)
    if not idx.size:
        return {}
    names = ev.name_id[tree.event[idx]]
    order = np.unique(names)
    sums = np.zeros((order.shape[0], work.shape[1]))
    slot = np.searchsorted(order, names)
    np.add.at(sums, slot, work[idx])
    gpu_us = np.bincount(slot, weights=times.gpu_total[idx].astype(np.float64), minlength=order.shape[0]) / 1000
    n_calls = np.bincount(slot, minlength=order.shape[0])
    bandwidth = spec.memory_bandwidth_bytes_per_s if spec is not None else None
    out = {}
    for i, name_id in enumerate(order.tolist()):
        flops_by = sums[i, :-1]
        dtype = dtypes[int(np.argmax(flops_by))] if flops_by.any() else None
        peak = _peak(spec, dtype)
        flops, moved = float(flops_by.sum()), float(sums[i, -1])
        p = roofline_point(flops, moved, float(gpu_us[i]), peak, bandwidth)
        out[trace.names[name_id]] = OpWork(
            calls=int(n_calls[i]), flops=flops, bytes=moved, gpu_us=float(gpu_us[i]), dtype=dtype,
            achieved_tflops=p.achieved_tflops, achieved_tb_s=p.achieved_tb_s, intensity=p.intensity,
            roofline_tflops=p.roofline_tflops, roofline_share=p.roofline_share, bound=p.bound)
    return out


def _peak(spec: GpuSpec | None, dtype: str | None) -> float | None:
    if spec is None or dtype is None:
        return None
    return next((spec.peak_flops(d) for d in DTYPES if d == dtype), None)


def _dtype_columns(trace: RankTrace, nodes: NodeCosts) -> tuple[tuple[str, ...], F64]:
    """Each node's own FLOPs in one column per type: fp32 GEMMs and convolutions whose kernels (their own or
    nested ones) are tensor-core kernels count as TF32, as in the run's count."""
    tf32 = _tf32_nodes(trace, nodes.tree)
    kinds: dict[str, int] = {}
    own = np.flatnonzero(nodes.cost_id >= 0)
    column = np.zeros(len(nodes.cost_id), dtype=np.intp)
    # Distinct (cost, autocast type, TF32) triples are few: the type is worked out once per triple.
    triple = (nodes.cost_id[own].astype(np.int64) * 4 + nodes.cast[own] + 1) * 2 + tf32[own]
    keys, first, inverse = np.unique(triple, return_index=True, return_inverse=True)
    of_key = []
    for at in first.tolist():
        node = int(own[at])
        ran_in = nodes.ran_in(node, nodes.costs[int(nodes.cost_id[node])], tf32=bool(tf32[node])) or "unknown"
        of_key.append(kinds.setdefault(ran_in, len(kinds)))
    column[own] = np.array(of_key, dtype=np.intp)[inverse] if keys.size else column[own]
    out = np.zeros((len(nodes.cost_id), max(len(kinds), 1)))
    out[own, column[own]] = nodes.flops()[own]
    return tuple(kinds) or ("unknown",), out


def _tf32_nodes(trace: RankTrace, tree: CallTree) -> npt.NDArray[np.bool_]:
    """Nodes that launched, themselves or in what is nested in them, a TF32 tensor-core kernel."""
    named = trace.name_mask(lambda s: any(p in s.lower() for p in TF32_KERNEL), Kind.KERNEL)
    hits = np.zeros((len(tree), 1))
    np.add.at(hits[:, 0], tree.gpu_node[named[tree.gpu]], 1.0)
    return np.asarray(_subtree_sums(tree, hits)[:, 0] > 0, dtype=bool)


def _subtree_sums(tree: CallTree, values: F64) -> F64:
    """``values`` (one row per node) summed over each node and everything nested in it (deepest level first, as
    the operator table sums GPU time)."""
    total = np.array(values, dtype=np.float64, copy=True)
    for depth in range(int(tree.depth.max(initial=0)), 0, -1):
        level = np.flatnonzero(tree.depth == depth)
        np.add.at(total, tree.parent[level], total[level])
    return total
