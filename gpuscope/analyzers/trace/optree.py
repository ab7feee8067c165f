"""The host call tree of one rank, and the GPU work each of its nodes launched.

Host ops, annotations, Python functions and profiler steps nest by time on their thread, the way the
PyTorch profiler's TensorBoard plugin and Holistic Trace Analysis build their call trees: sorted by start
(the longer first on a tie), each event is the child of the innermost open one that covers it; one that
starts inside an open event but ends after it crosses it, and is left out (the plugin drops it too).

A runtime call (cudaLaunchKernel, cudaMemcpyAsync ...) belongs to the innermost node of its thread that
covers it; in a trace whose runtime calls carry their op's ``External id`` (Kineto before PyTorch 2), to the
op it names, where that op is on its thread and covers it. The GPU work a runtime call launched joins it on
the correlation id.

As in the plugin (and ``torch.autograd.profiler``'s ``_remove_dup_nodes``), an op whose only child is an op
of the same name is one call: the child is folded into it. An annotation or Python function inside a host op
is folded into the op too: it is part of the op's own work (``record_param_comms`` launches its NCCL kernel
inside a ``nccl:all_reduce`` annotation), not a call of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace.steps import launched_gpu_events
from gpuscope.model.trace import Kind, RankTrace

IntP = npt.NDArray[np.intp]
I64 = npt.NDArray[np.int64]
TREE_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON, Kind.STEP)
"""Host events that are nodes of the call tree."""
ROOT = -1
ID_CONVENTION_SHARE = 0.5
"""Runtime calls' External ids are read as their ops' ids when at least this share of them name an op covering
them (the convention of Kineto before PyTorch 2)."""
DROPPED = -2
"""The parent of an event that crosses the one it starts in: not in the tree."""


@dataclass(frozen=True)
class CallTree:
    """Nodes are host events (``event`` indexes ``RankTrace.events``), in tree order: a parent before its
    children. Folded nodes (an op's only same-named child) and dropped ones carry no time of their own."""

    event: IntP
    parent: IntP
    """Position of the node's parent in this tree after folding; ROOT for a top-level node, DROPPED."""
    folded: npt.NDArray[np.bool_]
    """The node is folded into its parent (one call with it)."""
    depth: IntP
    """Depth after folding (top level 0); -1 for folded and dropped nodes."""
    runtime: IntP
    """Runtime call events that belong to a node."""
    runtime_node: IntP
    """The node (position, after folding) each of ``runtime`` belongs to."""
    gpu: IntP
    """GPU events (kernels, copies, memsets) launched by a runtime call of some node."""
    gpu_node: IntP
    """The node (position, after folding) that launched each of ``gpu``."""

    def __len__(self) -> int:
        return int(self.event.shape[0])

    @property
    def kept(self) -> npt.NDArray[np.bool_]:
        """Nodes that stand for calls of their own (not folded, not dropped)."""
        return self.depth >= 0


def call_tree(trace: RankTrace) -> CallTree:
    """The call tree of ``trace``'s host events, with runtime calls and GPU work attached."""
    ev = trace.events
    host = np.flatnonzero(ev.mask(*TREE_KINDS))
    order = np.lexsort((-ev.end_ns[host], ev.ts_ns[host], ev.tid[host]))
    nodes = host[order].astype(np.intp)
    parent = _nest(ev.tid[nodes], ev.ts_ns[nodes], ev.end_ns[nodes])
    folded = _folded(trace, nodes, parent)
    eff, depth = _effective(parent, folded, ev.kind[nodes])
    folded |= (depth < 0) & (parent != DROPPED)
    runtime, runtime_node = _runtime_owners(trace, nodes, parent)
    runtime_node = eff[runtime_node] if runtime_node.size else runtime_node
    rt_of, gpu = launched_gpu_events(trace)
    node_of_rt = np.full(len(ev), -1, dtype=np.intp)
    node_of_rt[runtime] = runtime_node
    gpu_node = node_of_rt[rt_of]
    owned = gpu_node >= 0
    return CallTree(event=nodes, parent=np.where(parent >= 0, eff[np.maximum(parent, 0)], parent), folded=folded,
                    depth=depth, runtime=runtime, runtime_node=runtime_node, gpu=gpu[owned].astype(np.intp),
                    gpu_node=gpu_node[owned])


def _nest(tid: I64, ts: I64, end: I64) -> IntP:
    """Each node's parent (a position), given nodes sorted by (thread, start, longer first).

    Where no node crosses another (the case of every well-formed trace), each thread's nesting is worked out in
    columns (``_nest_laminar``); a thread where one does is walked node by node (``_nest_walk``), which drops
    the crossing nodes."""
    parent = np.empty(tid.shape[0], dtype=np.intp)
    bounds = np.flatnonzero(np.diff(tid)) + 1
    for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), tid.shape[0]]):
        nested = _nest_laminar(ts[a:b], end[a:b])
        parent[a:b] = nested + a * (nested >= 0) if nested is not None else _nest_walk(ts[a:b], end[a:b], a)
    return parent


def _nest_laminar(ts: I64, end: I64) -> IntP | None:
    """The parents of one thread's nodes (sorted by start, longer first) where none crosses another; None where
    one does.

    Node k's ancestors are the earlier nodes still open at its start (end > ts[k]); their number is its depth,
    and its parent the last earlier node one level up. Counting the earlier nodes that closed by ts[k]: every
    node that ends by then is earlier, but for empty nodes at ts[k] itself (k among them, when it is one), which
    come last among the nodes starting there. Depth and parent so found are those of the walk exactly when each
    node lies within that parent (by induction on k: a node crossing an ancestor breaks this check first)."""
    n = ts.shape[0]
    pos = np.arange(n)
    # Nodes ending by ts[k] (k itself, when empty); ends come nearly in order, which timsort ("stable") runs through.
    closed = np.searchsorted(np.sort(end, kind="stable"), ts, side="right")
    empty = ts == end
    empty_ts = ts[empty]  # sorted: ts is
    empty_at = np.searchsorted(empty_ts, ts, side="right") - np.searchsorted(empty_ts, ts, side="left")
    before = np.cumsum(empty) - empty  # empty nodes before k
    empty_before = before - before[np.searchsorted(ts, ts, side="left")]  # ... of them at ts[k]
    depth = pos - (closed - empty_at + empty_before)
    key = depth * n + pos
    ordered = np.sort(key, kind="stable")
    at = np.searchsorted(ordered, (depth - 1) * n + pos, side="left") - 1
    found = ordered[np.maximum(at, 0)]
    inner = depth > 0
    parent = np.where(inner, found % n, ROOT)
    ok = ~inner | ((at >= 0) & (found // n == depth - 1) & (ts < end[parent]) & (end <= end[parent]))
    return parent if bool(ok.all()) else None


def _nest_walk(ts: I64, end: I64, offset: int) -> IntP:
    """The parents of one thread's nodes (positions from ``offset``), node by node: the innermost open node
    that covers each, DROPPED for a node that starts inside an open node and ends after it."""
    parent = [ROOT] * ts.shape[0]
    stack: list[int] = []
    ends = end.tolist()
    for k, (s, e) in enumerate(zip(ts.tolist(), ends)):
        while stack and s >= ends[stack[-1]]:
            stack.pop()
        if stack and e > ends[stack[-1]]:
            parent[k] = DROPPED
            continue
        parent[k] = stack[-1] + offset if stack else ROOT
        stack.append(k)
    return np.array(parent, dtype=np.intp)


def _folded(trace: RankTrace, nodes: IntP, parent: IntP) -> npt.NDArray[np.bool_]:
    """Ops that are the only child of an op of the same name."""
    inside = parent >= 0
    children = np.bincount(parent[inside], minlength=nodes.shape[0])
    p = np.where(inside, parent, 0)
    ev = trace.events
    is_op = ev.kind[nodes] == Kind.CPU_OP
    return np.asarray(inside & (children[p] == 1) & is_op & is_op[p]
                      & (ev.name_id[nodes] == ev.name_id[nodes][p]), dtype=bool)


def _effective(parent: IntP, folded: npt.NDArray[np.bool_], kind: npt.NDArray[np.uint8]) -> tuple[IntP, IntP]:
    """The node each node's time goes to (itself, or the op it is folded into), and depths after folding
    (-1: folded or dropped).

    A node's time goes to its parent's when it is folded, or when it is an annotation or Python frame inside an op;
    worked out a level of the tree at a time (a parent comes before its children, so each level needs only the
    one above it): a few array operations per level, where a node at a time would be a Python loop over every
    host event."""
    n = parent.shape[0]
    eff = np.arange(n, dtype=np.intp)
    depth = np.full(n, -1, dtype=np.intp)
    level = _levels(parent)
    depth[level == 0] = 0
    inner = (kind == Kind.USER_ANNOTATION) | (kind == Kind.PYTHON)
    is_op = kind == Kind.CPU_OP
    order = np.argsort(level, kind="stable")
    counts = np.bincount(level + 1, minlength=2)  # level -1 (dropped) first, then 0, 1, ...
    starts = np.cumsum(counts) - counts
    for lv in range(1, counts.shape[0] - 1):
        ks = order[starts[lv + 1]: starts[lv + 1] + counts[lv + 1]]
        ep = eff[parent[ks]]
        take = folded[ks] | (inner[ks] & is_op[ep])
        eff[ks] = np.where(take, ep, ks)
        depth[ks] = np.where(take, -1, depth[ep] + 1)
    return eff, depth


def _levels(parent: IntP) -> IntP:
    """Each node's level in the tree (0 for a top-level node; -1 for a dropped one), by pointer jumping: every
    node's distance to an ancestor, and that ancestor's, doubled each round until all reach the top."""
    has = parent >= 0
    level = has.astype(np.intp)
    up = np.where(has, parent, -1)
    while has.any():
        at = np.flatnonzero(has)
        to = up[at]
        level[at] += level[to]
        up[at] = up[to]
        has[at] = up[at] >= 0
    level[parent == DROPPED] = -1
    return level


def _runtime_owners(trace: RankTrace, nodes: IntP, parent: IntP) -> tuple[IntP, IntP]:
    """Runtime calls on some node, and that node (a position before folding)."""
    ev = trace.events
    runtime = np.flatnonzero(ev.kind == Kind.RUNTIME).astype(np.intp)
    by_time = _by_time(trace, nodes, parent, runtime)
    by_id = _by_op_id(trace, nodes, parent, runtime)
    # Kineto before PyTorch 2 gave a runtime call its op's External id; later ones give it an id of its own
    # (which may equal some op's by chance). The ids are read as op ids only where most calls name an op
    # that covers them, and then win over time, which cannot tell two ops apart at a shared boundary.
    named = by_id >= 0
    owner = np.where(named, by_id, by_time) if named.any() and named.mean() >= ID_CONVENTION_SHARE else by_time
    keep = owner >= 0
    return runtime[keep], owner[keep]


def _by_op_id(trace: RankTrace, nodes: IntP, parent: IntP, runtime: IntP) -> IntP:
    """The host op each runtime call names by External id, where that op is on its thread and covers it."""
    ev = trace.events
    ids, first = _by_external_id(np.where(ev.kind[nodes] == Kind.CPU_OP, ev.external_id[nodes], -1),
                                 parent != DROPPED)
    ext = ev.external_id[runtime]
    if not ids.shape[0]:
        return np.full(runtime.shape[0], -1, dtype=np.intp)
    at = np.minimum(np.searchsorted(ids, ext), ids.shape[0] - 1)
    named = ids[at] == ext
    k = np.where(named, first[at], 0)
    own = (named & (ev.tid[nodes][k] == ev.tid[runtime]) & (ev.ts_ns[nodes][k] <= ev.ts_ns[runtime])
           & (ev.end_ns[runtime] <= ev.end_ns[nodes][k]))
    return np.where(own, k, -1).astype(np.intp)


def _by_time(trace: RankTrace, nodes: IntP, parent: IntP, runtime: IntP) -> IntP:
    """The innermost node of each runtime call's thread that covers it; -1 where none does.

    From the last node of its thread to start before it, up the tree (past a dropped node, to the node before
    it) until a node covers it: each step taken for all the calls still looking at once."""
    ev = trace.events
    node_tid, node_ts, node_end = ev.tid[nodes], ev.ts_ns[nodes], ev.end_ns[nodes]
    tid, ts, end = ev.tid[runtime], ev.ts_ns[runtime], ev.end_ns[runtime]
    k = _last_started(node_tid, node_ts, tid, ts)
    looking = np.flatnonzero(k >= 0)
    while looking.size:
        at = k[looking]
        covers = (node_ts[at] <= ts[looking]) & (end[looking] <= node_end[at]) & (parent[at] != DROPPED)
        looking, at = looking[~covers], at[~covers]
        up = np.where(parent[at] != DROPPED, parent[at], at - 1)
        up = np.where((up < 0) | (node_tid[np.maximum(up, 0)] == tid[looking]), up, -1)
        k[looking] = up
        looking = looking[up >= 0]
    return k.astype(np.intp)


def _by_external_id(ext: I64, in_tree: npt.NDArray[np.bool_]) -> tuple[I64, IntP]:
    """The External ids of nodes in the tree (sorted) and the first node in tree order carrying each."""
    pos = np.flatnonzero(in_tree & (ext >= 0))
    ids, first = np.unique(ext[pos], return_index=True)  # the index of each id's first occurrence
    return ids, pos[first].astype(np.intp)


def _last_started(node_tid: I64, node_ts: I64, tid: I64, ts: I64) -> IntP:
    """For each (tid, ts): the last node (in tree order) of that thread starting at or before ts; -1 if none."""
    n = node_tid.shape[0]
    if n == 0:  # runtime calls and no host op to own them (a trace of GPU work and runtime calls only)
        return np.full(tid.shape[0], -1, dtype=np.intp)
    keys_tid = np.concatenate((node_tid, tid))
    keys_ts = np.concatenate((node_ts, ts))
    is_query = np.concatenate((np.zeros(n, np.int8), np.ones(tid.shape[0], np.int8)))
    order = np.lexsort((is_query, keys_ts, keys_tid))  # a node starting at ts comes before the query at ts
    position = np.where(order < n, order, -1)
    last = np.maximum.accumulate(position) if position.size else position
    # Tree order is (tid, start), so the running maximum is the last node started; it must be of this thread.
    out = np.empty(tid.shape[0], dtype=np.intp)
    queries = order >= n
    found = last[queries]
    same = (found >= 0) & (node_tid[np.maximum(found, 0)] == keys_tid[order[queries]])
    out[order[queries] - n] = np.where(same, found, -1)
    return out
