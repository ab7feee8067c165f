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

from gpuscope.analyzers.efficiency.ceiling import Work, flag, peak_of
from gpuscope.analyzers.efficiency.kernels import ALGORITHM_CODES, TF32_KERNEL, algorithm_of
from gpuscope.analyzers.efficiency.nodes import NodeCosts, node_costs
from gpuscope.analyzers.efficiency.roofline import roofline_point
from gpuscope.analyzers.trace.ops import NodeTimes, is_operator, node_times
from gpuscope.analyzers.trace.optree import CallTree
from gpuscope.model.efficiency import OpWork
from gpuscope.model.gpu_spec import GpuSpec
from gpuscope.model.trace import Kind, RankTrace

F64 = npt.NDArray[np.float64]


def op_work(trace: RankTrace, tree: CallTree, spec: GpuSpec | None, *, times: NodeTimes | None = None,
            suspect_peak: bool = False) -> dict[str, OpWork]:
    """Operator name -> its counted work and roofline; operators with no counted call are left out.
    ``suspect_peak``: the run's analysis says the GPU is not the one named (``ceiling.peak_suspected``)."""
    if not trace.shapes or not len(tree):
        return {}
    nodes = node_costs(trace, tree)
    times = times if times is not None else node_times(trace, tree)
    ev = trace.events
    calls = tree.kept & trace.name_mask(is_operator, Kind.CPU_OP)[tree.event]
    own = nodes.cost_id >= 0
    dtypes, by_dtype = _dtype_columns(trace, nodes)
    counted = nodes.counted
    again = np.where(nodes.owner >= 0, nodes.recomputed[np.maximum(nodes.owner, 0)], False)
    algorithm = _subtree_algorithm(trace, tree)
    flops = nodes.flops()
    extra = np.column_stack([nodes.bytes(), flops * again, flops * (algorithm > 0)])
    inside = _subtree_sums(tree, np.column_stack([np.where(counted[:, None], by_dtype, 0.0),
                                                  np.where(counted[:, None], extra, 0.0),
                                                  counted.astype(np.float64)]))
    work = np.where(own[:, None], np.column_stack([by_dtype, extra]), inside[:, :-1])
    known = calls & (own | (inside[:, -1] > 0))
    idx = np.flatnonzero(known)
    if not idx.size:
        return {}
    names = ev.name_id[tree.event[idx]]
    order = np.unique(names)
    sums = np.zeros((order.shape[0], work.shape[1]))
    slot = np.searchsorted(order, names)
    np.add.at(sums, slot, work[idx])
    best = np.zeros(order.shape[0], dtype=np.intp)
    np.maximum.at(best, slot, algorithm[idx])
    gpu_us = np.bincount(slot, weights=times.gpu_total[idx].astype(np.float64), minlength=order.shape[0]) / 1000
    n_calls = np.bincount(slot, minlength=order.shape[0])
    bandwidth = spec.memory_bandwidth_bytes_per_s if spec is not None else None
    d = len(dtypes)
    out = {}
    for i, name_id in enumerate(order.tolist()):
        flops_by = sums[i, :d]
        dtype = dtypes[int(np.argmax(flops_by))] if flops_by.any() else None
        total, moved = float(flops_by.sum()), float(sums[i, d])
        p = roofline_point(total, moved, float(gpu_us[i]), peak_of(spec, dtype), bandwidth)
        name = trace.names[name_id]
        found = flag(Work(name, total, moved, float(gpu_us[i]), dtype, fast_flops=float(sums[i, d + 2]),
                          algorithm=ALGORITHM_CODES[int(best[i])]), spec, suspect_peak=suspect_peak)
        out[name] = OpWork(
            calls=int(n_calls[i]), flops=total, bytes=moved, gpu_us=float(gpu_us[i]), dtype=dtype,
            achieved_tflops=p.achieved_tflops, achieved_tb_s=p.achieved_tb_s, intensity=p.intensity,
            roofline_tflops=p.roofline_tflops, roofline_share=p.roofline_share, bound=p.bound,
            recomputed_flops=float(sums[i, d + 1]), flag=found)
    return out


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


def _subtree_algorithm(trace: RankTrace, tree: CallTree) -> npt.NDArray[np.intp]:
    """Per node: the ``ALGORITHM_CODES`` index its kernels' names say (their own or nested ones'; 0: direct)."""
    out = np.zeros(len(tree), dtype=np.intp)
    for code in range(1, len(ALGORITHM_CODES)):
        def said(name: str, code: int = code) -> bool:
            return algorithm_of(name) == code
        named = trace.name_mask(said, Kind.KERNEL)
        hits = np.zeros((len(tree), 1))
        np.add.at(hits[:, 0], tree.gpu_node[named[tree.gpu]], 1.0)
        out = np.where(_subtree_sums(tree, hits)[:, 0] > 0, code, out)
    return out


def _subtree_sums(tree: CallTree, values: F64) -> F64:
    """``values`` (one row per node) summed over each node and everything nested in it (deepest level first, as
    the operator table sums GPU time)."""
    total = np.array(values, dtype=np.float64, copy=True)
    for depth in range(int(tree.depth.max(initial=0)), 0, -1):
        level = np.flatnonzero(tree.depth == depth)
        np.add.at(total, tree.parent[level], total[level])
    return total
