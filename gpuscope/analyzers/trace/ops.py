"""Time per PyTorch operator: the TensorBoard plugin's operator view and Holistic Trace Analysis' kernel
breakdown, per rank.

For each operator name (every call of it on the rank, wherever it ran):

- CPU total: the calls' wall time on their thread; CPU self: that less the time of the ops and annotations
  nested in it and of the runtime calls it made itself (the plugin's "host self duration", which since
  PyTorch 1.8 leaves runtime calls out as the profiler's own self CPU time does);
- GPU self: the time of the kernels, copies and memsets its own runtime calls launched (joined on the
  correlation id); GPU total: the same for it and everything nested in it;
- its kernels: the GPU work it launched itself, by name, with calls and time;
- shares: GPU total and CPU total over the time of the profiler steps (``steps.find_steps``, the steps every
  other view reports), so a share of 0.25 is a quarter of the profiled step time.

As in the plugin, the profiler steps, the DataLoader's ``__next__``, ``Optimizer.*`` and the (Distributed)
DataParallel forward are not operators: they frame other ops and would take their time twice.

A trace that records no operator (an Nsight Systems profile without ``emit_nvtx``, a program that is not PyTorch)
has its annotated ranges in the table instead (NVTX ranges, ``record_function``): the names its own code gave the
work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace.optree import CallTree, call_tree
from gpuscope.analyzers.trace.steps import find_steps
from gpuscope.model.efficiency import FamilyRoofline, OpWork
from gpuscope.model.errors import analysis_stage
from gpuscope.model.trace import Kind, RankTrace, source_of

SortKey = Literal["gpu_self", "gpu_total", "cpu_self", "cpu_total", "calls", "name"]
SORT_KEYS: tuple[SortKey, ...] = ("gpu_self", "gpu_total", "cpu_self", "cpu_total", "calls", "name")
_NOT_OPERATORS = ("DataParallel.forward", "DistributedDataParallel.forward")


@dataclass(frozen=True)
class OpKernel:
    """GPU work of one name that an operator launched itself."""

    name: str
    calls: int
    total_us: float


@dataclass(frozen=True)
class OpStat:
    """Every call of one operator on one rank."""

    name: str
    calls: int
    cpu_self_us: float
    cpu_total_us: float
    gpu_self_us: float
    gpu_total_us: float
    gpu_share: float | None
    """GPU total over the profiled step time; None without steps."""
    cpu_share: float | None
    """CPU total over the profiled step time; None without steps."""
    kernels: tuple[OpKernel, ...] = ()
    """What it launched itself, most time first."""
    efficiency: OpWork | None = None
    """FLOPs, bytes and the roofline of its calls (``analyzers.efficiency.opwork``); None where not counted."""


@dataclass(frozen=True)
class OpTable:
    """One rank's operators."""

    rank: int
    ops: tuple[OpStat, ...]
    """Most GPU self time first (the plugin's order), then most CPU self time."""
    steps: int
    """Profiler steps (0 in a trace without ProfilerStep events)."""
    steps_us: float | None
    """The profiled step time the shares are of (all profiler steps; the host span without them)."""
    gpu_us: float
    """All GPU work of the rank (kernels, copies, memsets)."""
    no_operator_gpu_us: float
    """GPU work in no operator's self time: launched by annotations or profiler steps outside every operator,
    or joined to no runtime call."""
    families: tuple[FamilyRoofline, ...] = ()
    """The rank's kernel families against the roofline over its steady steps (``gpuscope ops``); empty where not
    asked for or the trace has no recorded shapes."""
    by_range: bool = False
    """The rows are annotated ranges, not operators: the trace records no operator (``operator_kinds``)."""


def is_operator(name: str) -> bool:
    """Whether a host op of this name is an operator of the table (see the module's note)."""
    if name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__"):
        return False
    return not name.startswith(("Optimizer.", "ProfilerStep#")) and name not in _NOT_OPERATORS


def operator_kinds(trace: RankTrace) -> tuple[Kind, ...]:
    """The events that are the rows of the operator table: host operators, or, in a trace that records none but has
    annotated ranges (NVTX, ``record_function``), those ranges."""
    ev = trace.events
    ranges = not ev.mask(Kind.CPU_OP).any() and ev.mask(Kind.USER_ANNOTATION).any()
    return (Kind.USER_ANNOTATION,) if ranges else (Kind.CPU_OP,)


@analysis_stage("the operator table", source_of)
def operator_table(trace: RankTrace, *, tree: CallTree | None = None) -> OpTable:
    """The operator table of one rank (``tree``: its call tree, when the caller has it already)."""
    tree = tree if tree is not None else call_tree(trace)
    ev = trace.events
    steps = find_steps(trace)
    steps_ns = int((steps.ends_ns - steps.starts_ns).sum()) if len(steps) else 0
    times = node_times(trace, tree)
    ops = _aggregate(trace, tree, times, steps_ns)
    gpu_ns = int(ev.dur_ns[ev.mask(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)].sum())
    in_ops_us = sum(o.gpu_self_us for o in ops)
    return OpTable(rank=trace.rank, ops=ops, steps=len(steps) if steps.from_profiler else 0,
                   steps_us=steps_ns / 1000 if steps_ns else None, gpu_us=gpu_ns / 1000,
                   no_operator_gpu_us=max(gpu_ns / 1000 - in_ops_us, 0.0),
                   by_range=operator_kinds(trace) != (Kind.CPU_OP,))


def sort_ops(ops: tuple[OpStat, ...], key: SortKey) -> tuple[OpStat, ...]:
    """``ops`` by ``key``: the most first (names alphabetically)."""
    if key == "name":
        return tuple(sorted(ops, key=lambda o: o.name))
    field = {"gpu_self": "gpu_self_us", "gpu_total": "gpu_total_us", "cpu_self": "cpu_self_us",
             "cpu_total": "cpu_total_us", "calls": "calls"}[key]
    return tuple(sorted(ops, key=lambda o: (-getattr(o, field), o.name)))


@dataclass(frozen=True)
class NodeTimes:
    """Per node of the tree (positions), in ns."""

    cpu_total: npt.NDArray[np.int64]
    cpu_self: npt.NDArray[np.int64]
    gpu_self: npt.NDArray[np.int64]
    gpu_total: npt.NDArray[np.int64]


def node_times(trace: RankTrace, tree: CallTree) -> NodeTimes:
    """CPU and GPU time, self and total, of each node of ``tree``."""
    ev = trace.events
    n = len(tree)
    kept = tree.kept
    dur = np.where(kept, ev.dur_ns[tree.event], 0)
    nested = np.zeros(n, np.int64)
    child = np.flatnonzero(kept & (tree.parent >= 0))
    np.add.at(nested, tree.parent[child], dur[child])
    np.add.at(nested, tree.runtime_node, ev.dur_ns[tree.runtime])
    gpu_self = np.zeros(n, np.int64)
    np.add.at(gpu_self, tree.gpu_node, ev.dur_ns[tree.gpu])
    gpu_total = gpu_self.copy()
    for depth in range(int(tree.depth.max(initial=0)), 0, -1):  # deepest first: a child's total is complete
        level = np.flatnonzero(tree.depth == depth)
        np.add.at(gpu_total, tree.parent[level], gpu_total[level])
    return NodeTimes(cpu_total=dur, cpu_self=dur - nested, gpu_self=gpu_self, gpu_total=gpu_total)


def _aggregate(trace: RankTrace, tree: CallTree, t: NodeTimes, steps_ns: int) -> tuple[OpStat, ...]:
    ev = trace.events
    names = ev.name_id[tree.event]
    op_names = trace.name_mask(is_operator, *operator_kinds(trace))[tree.event]
    calls = tree.kept & op_names
    m = len(trace.names)

    def total(values: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return np.bincount(names[calls], weights=values[calls], minlength=m).astype(np.float64)

    count = np.bincount(names[calls], minlength=m)
    sums = [total(v) for v in (t.cpu_self, t.cpu_total, t.gpu_self, t.gpu_total)]
    kernels = _kernels(trace, tree, calls)
    out = []
    for i in np.flatnonzero(count).tolist():
        cpu_self, cpu_total, gpu_self, gpu_total = (float(s[i]) for s in sums)
        out.append(OpStat(name=trace.names[i], calls=int(count[i]), cpu_self_us=cpu_self / 1000,
                          cpu_total_us=cpu_total / 1000, gpu_self_us=gpu_self / 1000, gpu_total_us=gpu_total / 1000,
                          gpu_share=gpu_total / steps_ns if steps_ns else None,
                          cpu_share=cpu_total / steps_ns if steps_ns else None, kernels=kernels.get(i, ())))
    return tuple(sorted(out, key=lambda o: (-o.gpu_self_us, -o.cpu_self_us, o.name)))


def _kernels(trace: RankTrace, tree: CallTree, calls: npt.NDArray[np.bool_]) -> dict[int, tuple[OpKernel, ...]]:
    """Operator name id -> the GPU work its calls launched themselves, by name."""
    ev = trace.events
    mine = calls[tree.gpu_node]
    if not mine.any():
        return {}
    op = ev.name_id[tree.event[tree.gpu_node[mine]]].astype(np.int64)
    gpu = tree.gpu[mine]
    key = op * len(trace.names) + ev.name_id[gpu]
    uniq, inverse = np.unique(key, return_inverse=True)
    n = np.bincount(inverse)
    ns = np.bincount(inverse, weights=ev.dur_ns[gpu].astype(np.float64))
    out: dict[int, list[OpKernel]] = {}
    for k, c, d in zip(uniq.tolist(), n.tolist(), ns.tolist()):
        op_id, kernel_id = divmod(k, len(trace.names))
        out.setdefault(op_id, []).append(OpKernel(name=trace.names[kernel_id], calls=c, total_us=d / 1000))
    return {k: tuple(sorted(v, key=lambda x: (-x.total_us, x.name))) for k, v in out.items()}
