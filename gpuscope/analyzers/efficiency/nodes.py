"""What each host op call of a rank's call tree costs, counted once per distinct shape, and which calls are counted.

A training loop repeats its shapes every step: the calls of one operator with one recorded input shape (``name``,
``shape_id``) are costed once, in one pass over the distinct pairs, and every call takes its pair's cost through
numpy indexing. A convolution without ``Concrete Inputs`` takes its output's size from the matching backward call
(by input and weight shapes: the same for every call of a pair); only where none matches (inference, old
traces) is the op that consumed its output looked up call by call.

The outermost call that can be modelled is *counted* (its ancestors and descendants never are): ``owner`` gives
every node its counted ancestor-or-self, found by pointer jumping over the parent array (log2 of the tree's depth
passes), not by walking the tree in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.efficiency.flops import Hints, OpCost, conv_output_of, is_modelled, op_cost
from gpuscope.analyzers.efficiency.inputs import Inputs, parse
from gpuscope.analyzers.efficiency.recompute import recomputed
from gpuscope.analyzers.efficiency.schemas import bind
from gpuscope.analyzers.trace.optree import CallTree
from gpuscope.model.efficiency import MODEL_CLASSES
from gpuscope.model.trace import Kind, RankTrace

IntP = npt.NDArray[np.intp]
Shape = tuple[int, ...]
CONV_FORWARD = frozenset({"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution",
                          "aten::cudnn_convolution"})
_CONV_BACKWARD = {"aten::cudnn_convolution_backward": "self", "aten::convolution_backward": "input"}
"""Backward op -> the name of its forward's input among its arguments."""
CASTS = ("bf16", "fp16", "fp8")
"""Types autocast runs matrix work in: an fp32 op with a nested op of its class in one of these ran in it."""
COSTS_KEPT = 4096
"""Distinct (op, shapes) costs and parsed shapes a process keeps, for the next rank it reads (a ResNet-50 training
step has some 350)."""
CONSUMER_LOOKAHEAD = 40
"""How many later nodes of the tree a convolution without a shape hint looks through for the op that consumed it."""


@dataclass(frozen=True)
class NodeCosts:
    """Per node of a rank's call tree (positions in ``tree``): the cost of its own call and the counted one over it."""

    tree: CallTree
    cost_id: IntP
    """Index into ``costs`` of the node's own call (its operator at its recorded shape); -1: not modelled."""
    costs: tuple[OpCost, ...]
    """Each distinct (operator, shape, output hint) costed once."""
    owner: IntP
    """The counted node at or above each node; -1: none (the node's work is not modelled)."""
    cast: IntP
    """For a counted fp32 GEMM, convolution or attention: the index in ``CASTS`` of the type a nested op of its
    class ran in (under ``torch.autocast`` the outer ``aten::linear`` takes fp32 inputs and its inner one bf16);
    -1 elsewhere."""
    recomputed: npt.NDArray[np.bool_]
    """Counted calls re-run in backward for a checkpointed activation (``recompute``): hardware FLOPs only."""

    def ran_in(self, node: int, cost: OpCost, *, tf32: bool = False) -> str | None:
        """The type the work of counted ``node`` ran in: autocast's, else TF32 for an fp32 GEMM or convolution
        on tensor-core kernels, else its inputs'."""
        matrix = cost.dtype == "fp32" and cost.op_class in MODEL_CLASSES
        if matrix and self.cast[node] >= 0:
            return CASTS[int(self.cast[node])]
        if tf32 and cost.dtype == "fp32" and cost.op_class in ("gemm", "convolution"):
            return "tf32"
        return cost.dtype

    @property
    def counted(self) -> npt.NDArray[np.bool_]:
        """Nodes counted themselves: the outermost calls that can be modelled."""
        return np.asarray(self.owner == np.arange(len(self.owner)), dtype=bool)

    def flops(self) -> npt.NDArray[np.float64]:
        """Each node's own FLOPs (0 where not modelled)."""
        return self._column(lambda c: c.flops)

    def bytes(self) -> npt.NDArray[np.float64]:
        """Each node's own bytes moved (0 where not modelled)."""
        return self._column(lambda c: c.bytes)

    def _column(self, get: Callable[[OpCost], float]) -> npt.NDArray[np.float64]:
        table = np.array([float(get(c)) for c in self.costs] + [0.0], dtype=np.float64)
        return np.asarray(table[self.cost_id], dtype=np.float64)  # -1 picks the trailing 0


def node_costs(trace: RankTrace, tree: CallTree) -> NodeCosts:
    """The cost of every node's own call and the counted node over each."""
    ev = trace.events
    n = len(tree)
    events = tree.event
    sid = ev.shape_id[events].astype(np.int64)
    modelled = trace.name_mask(is_modelled, Kind.CPU_OP)[events]
    candidate = np.flatnonzero(tree.kept & modelled & (sid >= 0))
    cost_id = np.full(n, -1, dtype=np.intp)
    costs: list[OpCost] = []
    if candidate.size:
        parsed: dict[int, Inputs | None] = {}
        backward = _conv_outputs(trace, tree, parsed)
        name = ev.name_id[events[candidate]].astype(np.int64)
        key = name * (len(trace.shapes) + 1) + sid[candidate]
        pairs, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        pair_cost = np.full(pairs.shape[0], -1, dtype=np.intp)
        index: dict[tuple[int, int, Shape | None], int] = {}
        per_call: list[int] = []
        for p, at in enumerate(first.tolist()):
            node = int(candidate[at])
            name_id, shape = int(name[at]), int(sid[candidate[at]])
            inputs = _inputs(trace, shape, parsed)
            if inputs is None:
                continue
            hint = _backward_hint(trace.names[name_id], inputs, backward)
            if hint is _PER_CALL:
                per_call.append(p)
                continue
            pair_cost[p] = _cost_of(trace, name_id, shape, inputs, hint if isinstance(hint, tuple) else None,
                                    index, costs)
        cost_id[candidate] = pair_cost[inverse]
        for p in per_call:  # convolutions no backward call names: the consumer of each call's output
            for node in candidate[inverse == p].tolist():
                name_id, shape = int(ev.name_id[events[node]]), int(sid[node])
                inputs = _inputs(trace, shape, parsed)
                assert inputs is not None
                hint = _consumer_hint(trace, tree, node, inputs, parsed)
                cost_id[node] = _cost_of(trace, name_id, shape, inputs, hint, index, costs)
    owner = _owners(tree.parent, cost_id >= 0)
    counted = owner == np.arange(n)
    return NodeCosts(tree=tree, cost_id=cost_id, costs=tuple(costs), owner=owner,
                     cast=_casts(owner, cost_id, tuple(costs)), recomputed=recomputed(trace, tree, counted))


def _casts(owner: IntP, cost_id: IntP, costs: tuple[OpCost, ...]) -> IntP:
    """Per counted node: the autocast type (index in ``CASTS``) a nested op of its class ran in; -1: none."""
    cast = np.full(owner.shape[0], -1, dtype=np.intp)
    low = np.array([CASTS.index(c.dtype) if c.dtype in CASTS and c.op_class in MODEL_CLASSES else -1
                    for c in costs] + [-1], dtype=np.intp)
    klass = np.array([MODEL_CLASSES.index(c.op_class) if c.op_class in MODEL_CLASSES else -1 for c in costs] + [-2],
                     dtype=np.intp)
    inner = np.flatnonzero((cost_id >= 0) & (owner >= 0) & (owner != np.arange(owner.shape[0])) & (low[cost_id] >= 0))
    same = klass[cost_id[inner]] == klass[cost_id[owner[inner]]]
    cast[owner[inner[same]]] = low[cost_id[inner[same]]]
    return cast


def _cost_of(trace: RankTrace, name_id: int, shape: int, inputs: Inputs, hint: Shape | None,
             index: dict[tuple[int, int, Shape | None], int], costs: list[OpCost]) -> int:
    """The position of this (operator, shape, hint)'s cost in ``costs`` (costed on first sight); -1: none."""
    key = (name_id, shape, hint)
    if key not in index:
        cost = _op_cost(trace.names[name_id], inputs, hint)
        index[key] = -1 if cost is None else len(costs)
        if cost is not None:
            costs.append(cost)
    return index[key]


def _owners(parent: IntP, counted: npt.NDArray[np.bool_]) -> IntP:
    """The outermost counted node at or above each node (-1: none), by pointer jumping.

    ``top[i]`` is the outermost counted node on the path from ``i`` up to (not including) ``up[i]``; each pass joins
    a node's segment with the one above it, so the segments double until every one reaches the root.
    """
    n = parent.shape[0]
    top = np.where(counted, np.arange(n, dtype=np.intp), -1)
    up = np.where(parent >= 0, parent, -1).astype(np.intp)
    while (going := up >= 0).any():
        above = up[going]
        higher = top[above]
        top = top.copy()
        top[going] = np.where(higher >= 0, higher, top[going])
        up = up.copy()
        up[going] = up[above]
    return top


def _inputs(trace: RankTrace, shape: int, parsed: dict[int, Inputs | None]) -> Inputs | None:
    if shape not in parsed:
        parsed[shape] = _parse(trace.shapes[shape])
    return parsed[shape]


# The ranks of a job run the same ops on the same shapes, and a process reading several ranks (a worker) costs
# each (op, shapes) once: both functions are pure, their arguments and results frozen.
_parse = lru_cache(maxsize=COSTS_KEPT)(parse)


@lru_cache(maxsize=COSTS_KEPT)
def _op_cost(name: str, inputs: Inputs, hint: Shape | None) -> OpCost | None:
    return op_cost(name, inputs, Hints(conv_output=hint))


class _PerCall:
    """The hint cannot be known for the pair as a whole: look at each call's consumer."""


_PER_CALL = _PerCall()


def _backward_hint(name: str, a: Inputs, backward: dict[tuple[Shape, Shape], Shape]) -> Shape | None | _PerCall:
    """A forward convolution's output shape from its backward call; None where it needs none (not a convolution,
    or its stride and padding are recorded); ``_PER_CALL`` where only each call's consumer can tell."""
    c = bind(name, a) if name in CONV_FORWARD else None
    if c is None or conv_output_of(c) is not None:
        return None
    x, w = c.shape("self" if c.at("self") >= 0 else "input"), c.shape("weight")
    if x is None or w is None:
        return None
    hit = backward.get((x, w))
    return hit if hit is not None else _PER_CALL


def _conv_outputs(trace: RankTrace, tree: CallTree, parsed: dict[int, Inputs | None]) -> dict[tuple[Shape, Shape],
                                                                                              Shape]:
    """(input shape, weight shape) -> output shape, from the backward calls' gradient of the output: how a
    convolution of a trace without ``Concrete Inputs`` (stride, padding) finds its output's size. One look per
    distinct (backward op, shape)."""
    ev = trace.events
    events = tree.event
    is_backward = trace.name_mask(lambda s: s in _CONV_BACKWARD, Kind.CPU_OP)[events] & (ev.shape_id[events] >= 0)
    out: dict[tuple[Shape, Shape], Shape] = {}
    picked = events[is_backward]
    if not picked.size:
        return out
    pairs = np.unique(np.stack((ev.name_id[picked].astype(np.int64), ev.shape_id[picked].astype(np.int64))), axis=1)
    for name_id, shape in pairs.T.tolist():
        a = _inputs(trace, shape, parsed)
        name = trace.names[name_id]
        c = bind(name, a) if a is not None else None
        if c is None:
            continue
        x, g, w = c.shape(_CONV_BACKWARD[name]), c.shape("grad_output"), c.shape("weight")
        if x is not None and g is not None and w is not None:
            out[(x, w)] = g
    return out


def _consumer_hint(trace: RankTrace, tree: CallTree, node: int, a: Inputs,
                   parsed: dict[int, Inputs | None]) -> Shape | None:
    """No backward (inference): the next op on the thread that takes a tensor of [N, C_out, ...] consumed it."""
    ev = trace.events
    c = bind(trace.names[int(ev.name_id[tree.event[node]])], a)
    x = c.shape("self" if c.at("self") >= 0 else "input") if c is not None else None
    w = c.shape("weight") if c is not None else None
    if x is None or w is None:
        return None
    e = int(tree.event[node])
    end, tid = ev.ts_ns[e] + ev.dur_ns[e], ev.tid[e]
    for j in range(node + 1, min(node + CONSUMER_LOOKAHEAD, len(tree))):
        f = int(tree.event[j])
        if ev.tid[f] != tid or ev.ts_ns[f] < end or ev.kind[f] != Kind.CPU_OP or ev.shape_id[f] < 0:
            continue
        b = _inputs(trace, int(ev.shape_id[f]), parsed)
        y = b.shape(0) if b is not None else None
        if y is not None and len(y) == len(x) and y[0] == x[0] and y[1] == w[0]:
            return y
        return None
    return None
