"""One rank's operators counted once over its steady steps: FLOPs and bytes of each op call that can be modelled
(the outermost one: a parent counted is never counted again in its children), the GPU time of the kernels each
launched by kernel family, and the kernels of the ops that cannot be modelled.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.efficiency.flops import Hints, OpCost, op_cost
from gpuscope.analyzers.efficiency.inputs import Inputs, parse
from gpuscope.analyzers.trace import classify
from gpuscope.analyzers.trace.families import kernel_family
from gpuscope.analyzers.trace.optree import CallTree, call_tree
from gpuscope.analyzers.trace.startup import StepPlan
from gpuscope.model.efficiency import FamilyWork, GemmWork, RankEfficiency, UnmodelledOp
from gpuscope.model.trace import Kind, RankTrace

SMALL_GEMM_FLOPS = 2.0 * 256**3
"""A GEMM under 2 x 256^3 FLOPs (a 256-cube) leaves most SMs of a data-centre GPU idle: batch such products."""
TILE = 8
"""Tensor cores take GEMM dims in multiples of 8 (fp16/bf16; 16 bytes); other sizes are padded inside the kernel."""
EAGER_SCORES_MIN = 64
TOP_UNMODELLED = 15
NO_OP = "(kernels launched outside any host op)"
_TF32_KERNEL = ("tf32", "s1688", "tensorop_s", "xmma_gemm_f32f32")


@dataclass
class _Tally:
    flops: float = 0.0
    by_dtype: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    family_us: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    family_flops: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    family_bytes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    unmodelled: dict[str, list[float]] = field(default_factory=dict)
    gemms: dict[str, list[float]] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)
    op_kernels: dict[int, dict[str, float]] = field(default_factory=dict)
    """Counted node -> its kernels' time by family."""
    kernel_us: float = 0.0
    unmodelled_us: float = 0.0
    softmax_scores_us: float = 0.0
    fused_attention: bool = False
    elementwise_us: float = 0.0
    elementwise_bytes: float = 0.0


def count_rank(trace: RankTrace, plan: StepPlan) -> RankEfficiency:
    """The rank's work over its steady steps (per step where it has profiler steps)."""
    ev = trace.events
    steps = plan.analysed
    if not trace.shapes:
        return RankEfficiency(steps=len(steps) if steps.from_profiler else 0, model_flops=0.0, flops_by_dtype=(),
                              kernel_gpu_us=0.0, unmodelled_gpu_us=0.0, shapes_recorded=False)
    tree = call_tree(trace)
    in_steps = _in_steps(ev.ts_ns[tree.event], steps.starts_ns, steps.ends_ns)
    owner, costs = _counted(trace, tree)
    tally = _Tally()
    kernels = _compute_kernels(trace, tree)
    for k, node in kernels:
        if node >= 0 and not in_steps[node]:
            continue
        if node < 0 and not _in_steps(ev.ts_ns[k:k + 1], steps.starts_ns, steps.ends_ns)[0]:
            continue
        _add_kernel(trace, tree, tally, k, node, owner, costs)
    for node, cost in costs.items():
        if in_steps[node]:
            _add_op(trace, tree, tally, node, cost)
    n = max(len(steps), 1) if steps.from_profiler else 1
    return _result(tally, n, len(steps) if steps.from_profiler else 0)


def _in_steps(ts: npt.NDArray[np.int64], starts: npt.NDArray[np.int64],
              ends: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    if not starts.size:
        return np.zeros(ts.shape[0], dtype=bool)
    i = np.searchsorted(starts, ts, side="right") - 1
    ok = i >= 0
    return np.asarray(ok & (ts < ends[np.maximum(i, 0)]), dtype=bool)


def _compute_kernels(trace: RankTrace, tree: CallTree) -> list[tuple[int, int]]:
    """(kernel event, launching node or -1) for every compute kernel (collectives left out)."""
    ev = trace.events
    node_of = dict(zip(tree.gpu.tolist(), tree.gpu_node.tolist()))
    out = []
    comm = trace.name_mask(classify.is_comm_kernel, Kind.KERNEL)
    for k in np.flatnonzero(ev.mask(Kind.KERNEL) & ~comm).tolist():
        out.append((k, node_of.get(k, -1)))
    return out


def _counted(trace: RankTrace, tree: CallTree) -> tuple[npt.NDArray[np.intp], dict[int, OpCost]]:
    """Each node's counted ancestor-or-self (-1: none) and the cost of each counted node."""
    ev = trace.events
    parsed: dict[int, Inputs | None] = {}
    backward_out = _conv_outputs(trace, tree, parsed)
    owner = np.full(len(tree), -1, dtype=np.intp)
    costs: dict[int, OpCost] = {}
    cache: dict[tuple[int, int, tuple[int, ...] | None], OpCost | None] = {}
    for i in range(len(tree)):
        p = int(tree.parent[i])
        if p >= 0 and owner[p] >= 0:
            owner[i] = owner[p]
            continue
        e = int(tree.event[i])
        sid = int(ev.shape_id[e])
        if not tree.kept[i] or ev.kind[e] != Kind.CPU_OP or sid < 0:
            continue
        inputs = _inputs(trace, sid, parsed)
        if inputs is None:
            continue
        hint = _conv_hint(trace, tree, i, inputs, backward_out, parsed)
        key = (int(ev.name_id[e]), sid, hint)
        if key not in cache:
            cache[key] = op_cost(trace.names[ev.name_id[e]], inputs, Hints(conv_output=hint))
        cost = cache[key]
        if cost is not None:
            owner[i] = i
            costs[i] = cost
    return owner, costs


def _inputs(trace: RankTrace, sid: int, parsed: dict[int, Inputs | None]) -> Inputs | None:
    if sid not in parsed:
        parsed[sid] = parse(trace.shapes[sid])
    return parsed[sid]


_CONV_FWD = ("aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution",
             "aten::cudnn_convolution")


def _conv_outputs(trace: RankTrace, tree: CallTree, parsed: dict[int, Inputs | None]
                  ) -> dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, ...]]:
    """(input shape, weight shape) -> output shape, from the backward calls' gradient of the output: how a
    convolution of a trace without ``Concrete Inputs`` (stride, padding) finds its output's size."""
    ev = trace.events
    where = {"aten::cudnn_convolution_backward": (0, 1, 2), "aten::convolution_backward": (1, 0, 2)}
    out = {}
    for i in range(len(tree)):
        e = int(tree.event[i])
        at = where.get(trace.names[ev.name_id[e]])
        if at is None or ev.shape_id[e] < 0:
            continue
        a = _inputs(trace, int(ev.shape_id[e]), parsed)
        if a is None:
            continue
        x, g, w = a.shape(at[0]), a.shape(at[1]), a.shape(at[2])
        if x is not None and g is not None and w is not None:
            out[(x, w)] = g
    return out


def _conv_hint(trace: RankTrace, tree: CallTree, i: int, a: Inputs,
               backward_out: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, ...]],
               parsed: dict[int, Inputs | None]) -> tuple[int, ...] | None:
    ev = trace.events
    e = int(tree.event[i])
    if trace.names[ev.name_id[e]] not in _CONV_FWD or a.ints(3) is not None:
        return None
    x, w = a.shape(0), a.shape(1)
    if x is None or w is None:
        return None
    hit = backward_out.get((x, w))
    if hit is not None:
        return hit
    # No backward (inference): the next op on the thread that takes a tensor of [N, C_out, ...] consumed it.
    end, tid = ev.ts_ns[e] + ev.dur_ns[e], ev.tid[e]
    for j in range(i + 1, min(i + 40, len(tree))):
        f = int(tree.event[j])
        if ev.tid[f] != tid or ev.ts_ns[f] < end or ev.kind[f] != Kind.CPU_OP or ev.shape_id[f] < 0:
            continue
        b = _inputs(trace, int(ev.shape_id[f]), parsed)
        y = b.shape(0) if b is not None else None
        if y is not None and len(y) == len(x) and y[0] == x[0] and y[1] == w[0]:
            return y
        return None
    return None


def _add_kernel(trace: RankTrace, tree: CallTree, tally: _Tally, k: int, node: int,
                owner: npt.NDArray[np.intp], costs: dict[int, OpCost]) -> None:
    ev = trace.events
    us = float(ev.dur_ns[k]) / 1000.0
    name = trace.names[ev.name_id[k]]
    tally.kernel_us += us
    top = int(owner[node]) if node >= 0 else -1
    if top < 0:
        tally.unmodelled_us += us
        label = trace.names[ev.name_id[tree.event[node]]] if node >= 0 else NO_OP
        row = tally.unmodelled.setdefault(label, [0.0, 0.0])
        row[1] += us
        return
    family = kernel_family(name)
    tally.family_us[family] += us
    cost = costs[top]
    if cost.dtype == "fp32" and cost.op_class in ("gemm", "convolution") and any(
            p in name.lower() for p in _TF32_KERNEL):
        costs[top] = OpCost(cost.op_class, cost.flops, cost.bytes, "tf32", cost.mnk)
    spent = tally.op_kernels.setdefault(top, {})
    spent[family] = spent.get(family, 0.0) + us


def _add_op(trace: RankTrace, tree: CallTree, tally: _Tally, node: int, cost: OpCost) -> None:
    spent = tally.op_kernels.get(node, {})
    total_us = sum(spent.values())
    for family, us in spent.items():
        share = us / total_us if total_us > 0 else 0.0
        tally.family_flops[family] += cost.flops * share
        tally.family_bytes[family] += cost.bytes * share
    name = trace.names[trace.events.name_id[tree.event[node]]]
    if cost.op_class in ("gemm", "convolution", "attention"):
        tally.flops += cost.flops
        tally.by_dtype[cost.dtype or "unknown"] += cost.flops
        tally.fused_attention |= cost.op_class == "attention"
        _gemm_kinds(tally, name, cost, total_us)
    elif cost.op_class == "softmax" and _is_scores(trace, tree, node):
        tally.softmax_scores_us += total_us
    elif cost.op_class == "elementwise":
        tally.elementwise_us += total_us
        tally.elementwise_bytes += cost.bytes


def _gemm_kinds(tally: _Tally, name: str, cost: OpCost, us: float) -> None:
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
        row[0] += 1
        row[1] += cost.flops
        row[2] += us
        example = f"{name.removeprefix('aten::')} m,k,n={cost.mnk}" if cost.mnk else name.removeprefix("aten::")
        tally.examples.setdefault(f"gemm:{kind}", example)


def _is_scores(trace: RankTrace, tree: CallTree, node: int) -> bool:
    e = int(tree.event[node])
    sid = int(trace.events.shape_id[e])
    a = parse(trace.shapes[sid]) if sid >= 0 else None
    x = a.shape(0) if a is not None else None
    return x is not None and len(x) == 4 and min(x[2], x[3]) >= EAGER_SCORES_MIN


def _result(t: _Tally, n: int, steps: int) -> RankEfficiency:
    families = tuple(FamilyWork(family=f, gpu_us=us / n, flops=t.family_flops.get(f, 0.0) / n,
                                bytes=t.family_bytes.get(f, 0.0) / n)
                     for f, us in sorted(t.family_us.items(), key=lambda kv: -kv[1]))
    unmodelled = sorted(t.unmodelled.items(), key=lambda kv: -kv[1][1])[:TOP_UNMODELLED]
    gemms = tuple(GemmWork(kind=kind, calls=int(row[0] / n), flops=row[1] / n, gpu_us=row[2] / n,  # type: ignore[arg-type]
                           example=t.examples.get(f"gemm:{kind}", ""))
                  for kind, row in sorted(t.gemms.items()))
    return RankEfficiency(
        steps=steps, model_flops=t.flops / n, flops_by_dtype=tuple(sorted((d, f / n) for d, f in t.by_dtype.items())),
        kernel_gpu_us=t.kernel_us / n, unmodelled_gpu_us=t.unmodelled_us / n, families=families,
        unmodelled=tuple(UnmodelledOp(name=k, calls=0, gpu_us=v[1] / n) for k, v in unmodelled), gemms=gemms,
        eager_attention_us=0.0 if t.fused_attention else t.softmax_scores_us / n,
        elementwise_us=t.elementwise_us / n, elementwise_bytes=t.elementwise_bytes / n)
