"""One rank's operators counted once over its steady steps: FLOPs and bytes of each op call that can be modelled
(the outermost one: a parent counted is never counted again in its children), the GPU time of the kernels each
launched by kernel family, and the kernels of the ops that cannot be modelled.

Each step's FLOPs are those of its own calls (``kernels.host_spans``); a forward call re-run in backward for a
checkpointed activation is counted apart (hardware FLOPs, not the model's: ``recompute``).

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
from gpuscope.analyzers.efficiency.kernels import (
    ALGORITHM_CODES,
    Kernels,
    host_spans,
    node_algorithm,
    step_kernels,
    step_of,
)
from gpuscope.analyzers.efficiency.nodes import NodeCosts, node_costs
from gpuscope.analyzers.trace.optree import call_tree
from gpuscope.analyzers.trace.startup import StepPlan
from gpuscope.model.efficiency import (
    MODEL_CLASSES,
    FamilyWork,
    GemmWork,
    OpRate,
    RankEfficiency,
    UnmodelledOp,
)
from gpuscope.model.trace import RankTrace

F64 = npt.NDArray[np.float64]
IntP = npt.NDArray[np.intp]
SMALL_GEMM_FLOPS = 2.0 * 256**3
"""A GEMM under 2 x 256^3 FLOPs (a 256-cube) leaves most SMs of a data-centre GPU idle: batch such products."""
TILE = 8
"""Tensor cores take GEMM dims in multiples of 8 (fp16/bf16; 16 bytes); other sizes are padded inside the kernel."""
EAGER_SCORES_MIN = 64
TOP_UNMODELLED = 15
RATES_KEPT = 16
"""The fastest (operator, shape, type) groups a rank keeps for the check against the peak: work above it is at the
top of that order; a rank with more above it still shows in its families and in MFU."""
SHAPE_TEXT = 160
NO_OP = "(kernels launched outside any host op)"
MATRIX_FAMILIES = frozenset({"gemm", "convolution", "attention"})
"""The kernel families that do a matrix op's FLOPs (``analyzers.trace.families``)."""


@dataclass(frozen=True)
class _Groups:
    """The counted calls grouped by what varies their cost: one operator at one shape, the type it ran in (autocast,
    TF32 kernels) and whether it is a re-run for a checkpointed activation."""

    counted: IntP
    inverse: IntP
    """The group of each counted call."""
    first: IntP
    """Each group's first call (a position in ``counted``)."""
    costs: tuple[OpCost, ...]
    """Each group's cost, in the type its work ran in."""
    recomputed: npt.NDArray[np.bool_]
    algorithm: IntP
    """Each group's ``ALGORITHM_CODES`` index: the highest its calls' kernels say."""
    dtypes: tuple[str, ...]
    dtype: IntP
    """Each group's index into ``dtypes`` (the types its FLOPs ran in)."""

    def __len__(self) -> int:
        return len(self.costs)


@dataclass
class _Tally:
    flops: float = 0.0
    recomputed: float = 0.0
    untimed: float = 0.0
    by_dtype: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    gemms: dict[str, list[float]] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)
    softmax_scores_us: float = 0.0
    fused_attention: bool = False
    elementwise_us: float = 0.0
    elementwise_bytes: float = 0.0
    rates: list[OpRate] = field(default_factory=list)


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
    node_step = step_of(ev.ts_ns[tree.event], *host_spans(trace, steps))
    kernels = step_kernels(trace, nodes, node_step >= 0, steps.starts_ns, steps.ends_ns)
    per = max(len(steps), 1) if steps.from_profiler else 1
    modelled = kernels.top >= 0
    fam_us = np.bincount(kernels.family[modelled], weights=kernels.us[modelled],
                         minlength=len(kernels.families)).astype(np.float64)
    spent = _spent(kernels, len(tree))
    tf32 = np.zeros(len(tree), dtype=bool)
    tf32[kernels.top[modelled & kernels.tf32]] = True
    counted = np.flatnonzero(nodes.counted & (node_step >= 0))
    groups = _groups(nodes, counted, tf32, node_algorithm(kernels, len(tree)))
    families = _families(nodes, kernels, groups, fam_us, per)
    tally = _tally_ops(trace, nodes, groups, spent)
    unmodelled_us = float(kernels.us[~modelled].sum())
    step_model, step_recomputed = _step_flops(nodes, groups, node_step, len(steps))
    named = steps.from_profiler
    return RankEfficiency(
        steps=n_steps, model_flops=tally.flops / per,
        flops_by_dtype=tuple(sorted((d, f / per) for d, f in tally.by_dtype.items())),
        kernel_gpu_us=float(kernels.us.sum()) / per, unmodelled_gpu_us=unmodelled_us / per, families=families,
        unmodelled=_unmodelled(trace, tree.event, kernels, per), gemms=_gemm_work(tally, per),
        eager_attention_us=0.0 if tally.fused_attention else tally.softmax_scores_us / per,
        elementwise_us=tally.elementwise_us / per, elementwise_bytes=tally.elementwise_bytes / per,
        step_flops=tuple(zip(steps.names, step_model)) if named else (),
        recomputed_flops=tally.recomputed / per,
        step_recomputed_flops=tuple(zip(steps.names, step_recomputed)) if named else (),
        rates=_fastest(tally.rates, per), untimed_flops=tally.untimed / per)


def _groups(nodes: NodeCosts, counted: IntP, tf32: npt.NDArray[np.bool_], algorithm: IntP) -> _Groups:
    """The counted calls grouped; each group's type worked out once."""
    key = ((nodes.cost_id[counted].astype(np.int64) * 4 + nodes.cast[counted] + 1) * 2 + tf32[counted]) * 2 \
        + nodes.recomputed[counted]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.intp)
    costs: list[OpCost] = []
    dtypes: dict[str, int] = {}
    dtype: list[int] = []
    for at in first.tolist():
        node = int(counted[at])
        cost = nodes.costs[int(nodes.cost_id[node])]
        ran_in = nodes.ran_in(node, cost, tf32=bool(tf32[node]))
        costs.append(cost if ran_in == cost.dtype else OpCost(cost.op_class, cost.flops, cost.bytes, ran_in,
                                                              cost.mnk))
        dtype.append(dtypes.setdefault(ran_in or "unknown", len(dtypes)))
    best = np.zeros(first.shape[0], dtype=np.intp)
    np.maximum.at(best, inverse, algorithm[counted])
    return _Groups(counted=counted, inverse=inverse, first=first.astype(np.intp), costs=tuple(costs),
                   recomputed=nodes.recomputed[counted[first]], algorithm=best, dtypes=tuple(dtypes),
                   dtype=np.array(dtype, dtype=np.intp))


def _step_flops(nodes: NodeCosts, groups: _Groups, node_step: IntP, n: int) -> tuple[list[float], list[float]]:
    """Model FLOPs and re-run FLOPs of each step: those of its own counted GEMM, convolution and attention calls
    (the same calls ``_tally_ops`` sums)."""
    if not len(groups):
        return [0.0] * n, [0.0] * n
    matrix = np.array([c.op_class in MODEL_CLASSES for c in groups.costs])[groups.inverse]
    again = groups.recomputed[groups.inverse]
    step = node_step[groups.counted]
    flops = nodes.flops()[groups.counted]
    model = np.bincount(step[matrix & ~again], weights=flops[matrix & ~again], minlength=n)
    rerun = np.bincount(step[matrix & again], weights=flops[matrix & again], minlength=n)
    return [float(f) for f in model[:n]], [float(f) for f in rerun[:n]]


def _spent(kernels: Kernels, n: int) -> F64:
    """Each counted node's kernel time (µs) in the steps."""
    modelled = kernels.top >= 0
    return np.bincount(kernels.top[modelled], weights=kernels.us[modelled], minlength=n).astype(np.float64)


def _families(nodes: NodeCosts, kernels: Kernels, groups: _Groups, fam_us: F64, per: int) -> tuple[FamilyWork, ...]:
    """Each counted op's FLOPs and bytes shared among the families of its kernels by their time; a GEMM's,
    convolution's or attention's FLOPs only among its matrix kernels where it has any (under autocast an
    ``aten::linear`` also launches the casts of its inputs: they move bytes, the GEMM does the FLOPs). Each family
    with the type most of its FLOPs ran in, and those done by fewer multiplications than counted."""
    m, d = len(kernels.families), max(len(groups.dtypes), 1)
    by_dtype: F64 = np.zeros((m, d))
    moved: F64 = np.zeros(m)
    fast: F64 = np.zeros(m)
    by_algorithm = np.zeros((m, len(ALGORITHM_CODES)))
    mine = kernels.top >= 0
    if mine.any() and len(groups):
        n = len(nodes.owner)
        group_of = np.full(n, -1, dtype=np.intp)
        group_of[groups.counted] = groups.inverse
        top, fam, us = kernels.top[mine], kernels.family[mine], kernels.us[mine]
        keep = group_of[top] >= 0
        top, fam, us = top[keep], fam[keep], us[keep]
        g = group_of[top]
        matrix_family = np.array([f in MATRIX_FAMILIES for f in kernels.families], dtype=bool)
        matrix_op = np.array([c.op_class in MODEL_CLASSES for c in groups.costs])[g]
        total = np.bincount(top, weights=us, minlength=n)
        on_matrix = np.where(matrix_family[fam], us, 0.0)
        matrix_total = np.bincount(top, weights=on_matrix, minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            by_time = np.where(total[top] > 0, us / total[top], 0.0)
            by_matrix = np.where(matrix_total[top] > 0, on_matrix / matrix_total[top], by_time)
        flops = nodes.flops()[top] * np.where(matrix_op, by_matrix, by_time)
        np.add.at(by_dtype, (fam, groups.dtype[g]), flops)
        moved = np.bincount(fam, weights=nodes.bytes()[top] * by_time, minlength=m).astype(np.float64)
        fast = np.bincount(fam, weights=np.where(groups.algorithm[g] > 0, flops, 0.0), minlength=m).astype(np.float64)
        np.add.at(by_algorithm, (fam, groups.algorithm[g]), flops)
    by_algorithm[:, 0] = 0.0
    flops_of = by_dtype.sum(axis=1)
    return tuple(FamilyWork(family=kernels.families[f], gpu_us=float(fam_us[f]) / per,
                            flops=float(flops_of[f]) / per, bytes=float(moved[f]) / per,
                            dtype=groups.dtypes[int(np.argmax(by_dtype[f]))] if flops_of[f] > 0 else None,
                            fast_algorithm_flops=float(fast[f]) / per,
                            fast_algorithm=ALGORITHM_CODES[int(np.argmax(by_algorithm[f]))] if fast[f] > 0
                            else "direct")
                 for f in sorted(np.flatnonzero(fam_us > 0).tolist(), key=lambda f: -fam_us[f]))


def _tally_ops(trace: RankTrace, nodes: NodeCosts, groups: _Groups, spent: F64) -> _Tally:
    """Model FLOPs by type, re-run FLOPs, GEMM kinds, eager attention, elementwise work and each matrix group's
    rate, one group at a time, in the order the calls first ran."""
    tally = _Tally()
    if not len(groups):
        return tally
    calls = np.bincount(groups.inverse)
    us = np.bincount(groups.inverse, weights=spent[groups.counted])
    events = nodes.tree.event[groups.counted[groups.first]]
    name_ids = trace.events.name_id[events]
    shape_ids = trace.events.shape_id[events]
    for g in np.argsort(groups.first, kind="stable").tolist():
        cost, name = groups.costs[g], trace.names[int(name_ids[g])]
        n, t, shape = int(calls[g]), float(us[g]), int(shape_ids[g])
        if cost.op_class in MODEL_CLASSES and groups.recomputed[g]:
            tally.recomputed += cost.flops * n
            _gemm_kinds(tally, name, cost, n, t)
            continue
        _add(tally, trace, name, cost, n, t, shape)
        if cost.op_class in MODEL_CLASSES and cost.flops > 0:
            if t > 0:
                tally.rates.append(OpRate(op=name, shape=trace.shapes[shape].dims[:SHAPE_TEXT], dtype=cost.dtype,
                                          calls=n, flops=cost.flops * n, gpu_us=t,
                                          algorithm=ALGORITHM_CODES[int(groups.algorithm[g])]))
            else:
                tally.untimed += cost.flops * n
    return tally


def _fastest(rates: list[OpRate], per: int) -> tuple[OpRate, ...]:
    """The ``RATES_KEPT`` fastest groups, per step."""
    rates.sort(key=lambda r: (-r.flops / r.gpu_us, r.op, r.shape))
    return tuple(OpRate(op=r.op, shape=r.shape, dtype=r.dtype, calls=r.calls, flops=r.flops / per,
                        gpu_us=r.gpu_us / per, algorithm=r.algorithm) for r in rates[:RATES_KEPT])


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
