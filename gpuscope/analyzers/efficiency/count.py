"""One rank's operators counted once over its steady steps: FLOPs and bytes of each op call that can be modelled
(the outermost one: a parent counted is never counted again in its children), the GPU time of the kernels each
launched by kernel family, and the kernels of the ops that cannot be modelled.

Columnar: kernels are joined to their counted op and their family with numpy (a family is looked up once per
distinct kernel name), and the counted calls are grouped by their cost (one operator at one shape) so Python
touches each distinct shape once, not each call.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.efficiency.flops import OpCost
from gpuscope.analyzers.efficiency.inputs import parse
from gpuscope.analyzers.efficiency.nodes import NodeCosts, node_costs
from gpuscope.analyzers.trace import classify
from gpuscope.analyzers.trace.families import kernel_family
from gpuscope.analyzers.trace.optree import call_tree
from gpuscope.analyzers.trace.startup import StepPlan
from gpuscope.analyzers.trace.steps import Steps
from gpuscope.model.efficiency import MODEL_CLASSES, FamilyWork, GemmWork, RankEfficiency, UnmodelledOp
from gpuscope.model.trace import Kind, RankTrace

F64 = npt.NDArray[np.float64]
IntP = npt.NDArray[np.intp]
SMALL_GEMM_FLOPS = 2.0 * 256**3
"""A GEMM under 2 x 256^3 FLOPs (a 256-cube) leaves most SMs of a data-centre GPU idle: batch such products."""
TILE = 8
"""Tensor cores take GEMM dims in multiples of 8 (fp16/bf16; 16 bytes); other sizes are padded inside the kernel."""
EAGER_SCORES_MIN = 64
TOP_UNMODELLED = 15
NO_OP = "(kernels launched outside any host op)"
MATRIX_FAMILIES = frozenset({"gemm", "convolution", "attention"})
"""The kernel families that do a matrix op's FLOPs (``analyzers.trace.families``)."""
TF32_KERNEL = ("tf32", "s1688", "tensorop_s", "xmma_gemm_f32f32")
"""Parts of the names of the kernels cuBLAS and cuDNN run fp32 GEMMs and convolutions on tensor cores with."""


@dataclass(frozen=True)
class Kernels:
    """A rank's compute kernels in its steady steps (collectives left out), each with what it belongs to."""

    event: IntP
    node: IntP
    """The node that launched it (-1: none)."""
    top: IntP
    """Its counted op (-1: none: unmodelled)."""
    us: F64
    family: IntP
    """Index into ``families``."""
    families: tuple[str, ...]
    tf32: npt.NDArray[np.bool_]
    """Its name is a tensor-core fp32 (TF32) kernel's."""


@dataclass
class _Tally:
    flops: float = 0.0
    by_dtype: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    gemms: dict[str, list[float]] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)
    softmax_scores_us: float = 0.0
    fused_attention: bool = False
    elementwise_us: float = 0.0
    elementwise_bytes: float = 0.0


def count_rank(trace: RankTrace, plan: StepPlan) -> RankEfficiency:
    """The rank's work over its steady steps (per step where it has profiler steps)."""
    steps = plan.analysed
    n_steps = len(steps) if steps.from_profiler else 0
    if not trace.shapes:
        return RankEfficiency(steps=n_steps, model_flops=0.0, flops_by_dtype=(), kernel_gpu_us=0.0,
                              unmodelled_gpu_us=0.0, shapes_recorded=False)
    tree = call_tree(trace)
    nodes = node_costs(trace, tree)
    ev = trace.events
    in_steps = in_windows(ev.ts_ns[tree.event], steps.starts_ns, steps.ends_ns)
    kernels = step_kernels(trace, nodes, in_steps, steps.starts_ns, steps.ends_ns)
    per = max(len(steps), 1) if steps.from_profiler else 1
    modelled = kernels.top >= 0
    fam_us = np.bincount(kernels.family[modelled], weights=kernels.us[modelled], minlength=len(kernels.families))
    spent = _spent(kernels, len(tree))
    tf32 = np.zeros(len(tree), dtype=bool)
    tf32[kernels.top[modelled & kernels.tf32]] = True
    counted = np.flatnonzero(nodes.counted & in_steps)
    fam_flops, fam_bytes = _family_work(nodes, kernels, counted)
    tally = _tally_ops(trace, nodes, counted, spent, tf32)
    families = tuple(FamilyWork(family=kernels.families[f], gpu_us=float(fam_us[f]) / per,
                                flops=float(fam_flops[f]) / per, bytes=float(fam_bytes[f]) / per)
                     for f in sorted(np.flatnonzero(fam_us > 0).tolist(), key=lambda f: -fam_us[f]))
    unmodelled_us = float(kernels.us[~modelled].sum())
    return RankEfficiency(
        steps=n_steps, model_flops=tally.flops / per,
        flops_by_dtype=tuple(sorted((d, f / per) for d, f in tally.by_dtype.items())),
        kernel_gpu_us=float(kernels.us.sum()) / per, unmodelled_gpu_us=unmodelled_us / per, families=families,
        unmodelled=_unmodelled(trace, tree.event, kernels, per), gemms=_gemm_work(tally, per),
        eager_attention_us=0.0 if tally.fused_attention else tally.softmax_scores_us / per,
        elementwise_us=tally.elementwise_us / per, elementwise_bytes=tally.elementwise_bytes / per,
        step_flops=_step_flops(nodes, counted, ev.ts_ns[tree.event], steps) if steps.from_profiler else ())


def _step_flops(nodes: NodeCosts, counted: IntP, node_ts_ns: npt.NDArray[np.int64],
                steps: Steps) -> tuple[tuple[str, float], ...]:
    """Model FLOPs of each step, by its name: those of the counted GEMM, convolution and attention calls that
    started in it (the same calls ``_tally_ops`` sums)."""
    model = np.array([c.op_class in MODEL_CLASSES for c in nodes.costs] + [False])[nodes.cost_id[counted]]
    step = np.searchsorted(steps.starts_ns, node_ts_ns[counted], side="right") - 1
    flops = np.bincount(step[model], weights=nodes.flops()[counted][model], minlength=len(steps))
    return tuple((name, float(f)) for name, f in zip(steps.names, flops))


def in_windows(ts: npt.NDArray[np.int64], starts: npt.NDArray[np.int64],
               ends: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Which of ``ts`` fall in one of the sorted windows [start, end)."""
    if not starts.size:
        return np.zeros(ts.shape[0], dtype=bool)
    i = np.searchsorted(starts, ts, side="right") - 1
    return np.asarray((i >= 0) & (ts < ends[np.maximum(i, 0)]), dtype=bool)


def step_kernels(trace: RankTrace, nodes: NodeCosts, node_in_steps: npt.NDArray[np.bool_],
                 starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]) -> Kernels:
    """The compute kernels whose launching op (or, launched by none, whose own start) is in the steps."""
    ev, tree = trace.events, nodes.tree
    comm = trace.name_mask(classify.is_comm_kernel, Kind.KERNEL)
    k = np.flatnonzero(ev.mask(Kind.KERNEL) & ~comm).astype(np.intp)
    node_of = np.full(len(ev), -1, dtype=np.intp)
    node_of[tree.gpu] = tree.gpu_node
    node = node_of[k]
    keep = np.where(node >= 0, node_in_steps[np.maximum(node, 0)], in_windows(ev.ts_ns[k], starts, ends))
    k, node = k[keep], node[keep]
    names, name_index = np.unique(ev.name_id[k], return_inverse=True)
    family_of = [kernel_family(trace.names[i], communication=False) for i in names.tolist()]
    families = tuple(dict.fromkeys(family_of))
    fam = np.array([families.index(f) for f in family_of], dtype=np.intp)
    tf32 = np.array([any(p in trace.names[i].lower() for p in TF32_KERNEL) for i in names.tolist()], dtype=bool)
    return Kernels(event=k, node=node, top=np.where(node >= 0, nodes.owner[np.maximum(node, 0)], -1),
                   us=ev.dur_ns[k].astype(np.float64) / 1000.0, family=fam[name_index].astype(np.intp),
                   families=families, tf32=tf32[name_index] if names.size else np.zeros(0, dtype=bool))


def _spent(kernels: Kernels, n: int) -> F64:
    """Each counted node's kernel time (µs) in the steps."""
    modelled = kernels.top >= 0
    return np.bincount(kernels.top[modelled], weights=kernels.us[modelled], minlength=n).astype(np.float64)


def _family_work(nodes: NodeCosts, kernels: Kernels, counted: IntP) -> tuple[F64, F64]:
    """Each counted op's FLOPs and bytes shared among the families of its kernels by their time; a GEMM's,
    convolution's or attention's FLOPs only among its matrix kernels where it has any (under autocast an
    ``aten::linear`` also launches the casts of its inputs: they move bytes, the GEMM does the FLOPs)."""
    m = len(kernels.families)
    flops, moved = np.zeros(m), np.zeros(m)
    mine = kernels.top >= 0
    if not mine.any() or not counted.size:
        return flops, moved
    is_counted = np.zeros(len(nodes.owner), dtype=bool)
    is_counted[counted] = True
    top, fam, us = kernels.top[mine], kernels.family[mine], kernels.us[mine]
    keep = is_counted[top]
    top, fam, us = top[keep], fam[keep], us[keep]
    n = len(nodes.owner)
    matrix_family = np.array([f in MATRIX_FAMILIES for f in kernels.families], dtype=bool)
    matrix_op = np.array([c.op_class in MODEL_CLASSES for c in nodes.costs] + [False])[nodes.cost_id]
    total = np.bincount(top, weights=us, minlength=n)
    on_matrix = np.where(matrix_family[fam], us, 0.0)
    matrix_total = np.bincount(top, weights=on_matrix, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        by_time = np.where(total[top] > 0, us / total[top], 0.0)
        by_matrix = np.where(matrix_total[top] > 0, on_matrix / matrix_total[top], by_time)
    share = np.where(matrix_op[top], by_matrix, by_time)
    flops += np.bincount(fam, weights=nodes.flops()[top] * share, minlength=m)
    moved += np.bincount(fam, weights=nodes.bytes()[top] * by_time, minlength=m)
    return flops, moved


def _tally_ops(trace: RankTrace, nodes: NodeCosts, counted: IntP, spent: F64,
               tf32: npt.NDArray[np.bool_]) -> _Tally:
    """Model FLOPs by type, GEMM kinds, eager attention and elementwise work of the counted calls, one distinct
    (cost, TF32 kernels) group at a time, in the order the calls first ran."""
    tally = _Tally()
    if not counted.size:
        return tally
    # One group per (cost, type it ran in): autocast's type (-1..2) and TF32 kernels are what vary between calls.
    group = (nodes.cost_id[counted].astype(np.int64) * 4 + nodes.cast[counted] + 1) * 2 + tf32[counted]
    keys, first, inverse = np.unique(group, return_index=True, return_inverse=True)
    calls = np.bincount(inverse)
    us = np.bincount(inverse, weights=spent[counted])
    name_ids = trace.events.name_id[nodes.tree.event[counted[first]]]
    for g in np.argsort(first, kind="stable").tolist():
        node = int(counted[first[g]])
        cost = nodes.costs[int(nodes.cost_id[node])]
        ran_in = nodes.ran_in(node, cost, tf32=bool(tf32[node]))
        if ran_in != cost.dtype:
            cost = OpCost(cost.op_class, cost.flops, cost.bytes, ran_in, cost.mnk)
        _add(tally, trace, trace.names[int(name_ids[g])], cost, int(calls[g]), float(us[g]),
             int(trace.events.shape_id[nodes.tree.event[counted[first[g]]]]))
    return tally


def _add(tally: _Tally, trace: RankTrace, name: str, cost: OpCost, calls: int, us: float, shape: int) -> None:
    if cost.op_class in MODEL_CLASSES:
        tally.flops += cost.flops * calls
        tally.by_dtype[cost.dtype or "unknown"] += cost.flops * calls
        tally.fused_attention |= cost.op_class == "attention"
        _gemm_kinds(tally, name, cost, calls, us)
    elif cost.op_class == "softmax" and _is_scores(trace, shape):
        tally.softmax_scores_us += us
    elif cost.op_class == "elementwise":
        tally.elementwise_us += us
        tally.elementwise_bytes += cost.bytes * calls


def _gemm_kinds(tally: _Tally, name: str, cost: OpCost, calls: int, us: float) -> None:
    kinds = []
    if cost.dtype == "fp32":
        kinds.append("fp32")
    if cost.op_class == "gemm" and cost.mnk is not None:
        if any(d % TILE for d in cost.mnk) and cost.dtype in ("fp16", "bf16", "tf32", "fp8"):
            kinds.append("unaligned")
        if cost.flops < SMALL_GEMM_FLOPS:
            kinds.append("small")
    for kind in kinds:
        row = tally.gemms.setdefault(kind, [0.0, 0.0, 0.0])
        row[0] += calls
        row[1] += cost.flops * calls
        row[2] += us
        example = f"{name.removeprefix('aten::')} m,k,n={cost.mnk}" if cost.mnk else name.removeprefix("aten::")
        tally.examples.setdefault(f"gemm:{kind}", example)


def _is_scores(trace: RankTrace, shape: int) -> bool:
    a = parse(trace.shapes[shape]) if shape >= 0 else None
    x = a.shape(0) if a is not None else None
    return x is not None and len(x) == 4 and min(x[2], x[3]) >= EAGER_SCORES_MIN


def _unmodelled(trace: RankTrace, tree_event: IntP, kernels: Kernels, per: int) -> tuple[UnmodelledOp, ...]:
    """GPU time of the kernels no counted op launched, by the op that launched them (most first)."""
    lost = kernels.top < 0
    if not lost.any():
        return ()
    node = kernels.node[lost]
    label = np.where(node >= 0, trace.events.name_id[tree_event[np.maximum(node, 0)]], len(trace.names))
    us = np.bincount(label, weights=kernels.us[lost], minlength=len(trace.names) + 1)
    rows = [(trace.names[i] if i < len(trace.names) else NO_OP, float(us[i])) for i in np.flatnonzero(us > 0)]
    rows.sort(key=lambda r: (-r[1], r[0]))  # most GPU time first; ties by name, so the order is the same every run
    return tuple(UnmodelledOp(name=name, calls=0, gpu_us=t / per) for name, t in rows[:TOP_UNMODELLED])


def _gemm_work(t: _Tally, per: int) -> tuple[GemmWork, ...]:
    return tuple(GemmWork(kind=kind, calls=int(row[0] / per), flops=row[1] / per, gpu_us=row[2] / per,  # type: ignore[arg-type]
                          example=t.examples.get(f"gemm:{kind}", ""))
                 for kind, row in sorted(t.gemms.items()))
