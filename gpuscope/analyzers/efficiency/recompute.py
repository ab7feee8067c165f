"""Forward operators re-run in backward to rebuild a checkpointed activation (activation checkpointing): hardware
FLOPs, never model FLOPs (PaLM, Chowdhery et al. 2022, appendix B: MFU counts the model's forward and backward once;
HFU adds the rematerialisation).

A call is a re-run when it runs inside a backward node (``autograd::engine::evaluate_function: ...``, an autograd
node ``...Backward0``) and

- inside a checkpoint's own frame there: ``CheckpointFunctionBackward`` (reentrant checkpointing in torch, Megatron,
  DeepSpeed, which re-runs the forward and then runs its backward inside that node: the ops of that nested backward
  sit in their own backward nodes inside it, and are the model's), or a Python frame of a checkpoint's recompute
  (``torch/utils/checkpoint.py(...): recompute_fn`` / ``unpack_hook``, a trace recorded with ``with_stack``): the
  call site; or
- it records a ``Sequence number`` (grad mode was on: it built a graph node) that no backward node of the trace
  carries (non-reentrant checkpointing re-runs the forward with grad on and never runs the backward of what it
  rebuilt; a backward's own ops run with grad off and record none): the sequence number, for traces without stacks.

An op that computes a gradient (``*_backward``) is never a re-run.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.trace.optree import DROPPED, CallTree
from gpuscope.model.trace import Kind, RankTrace

I64 = npt.NDArray[np.int64]
NONE_NS = np.iinfo(np.int64).min
_BACKWARD_NODE = re.compile(r"^(autograd::engine::evaluate_function: .*|[A-Za-z_][\w:]*Backward\d*)$")
_CHECKPOINT_NODE = "CheckpointFunctionBackward"
_CHECKPOINT_FRAME = re.compile(r"checkpoint(ing)?\.py\(\d+\): (recompute_fn|unpack_hook|unpack|backward)$")


def is_backward_node(name: str) -> bool:
    """An autograd node's call (the engine's wrapper or the node itself)."""
    return _BACKWARD_NODE.match(name) is not None


def is_checkpoint_marker(name: str) -> bool:
    """A checkpoint's recompute: its reentrant autograd node, or a frame of torch's (or DeepSpeed's) recompute."""
    return _CHECKPOINT_NODE in name or _CHECKPOINT_FRAME.search(name) is not None


def recomputed(trace: RankTrace, tree: CallTree, candidates: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Which of the tree's nodes (among ``candidates``) are forward calls re-run for a checkpointed activation."""
    out = np.zeros(len(tree), dtype=bool)
    ask = np.flatnonzero(candidates)
    if not ask.size:
        return out
    ev = trace.events
    events = tree.event
    backward = trace.name_mask(is_backward_node, Kind.CPU_OP)[events]
    if not backward.any():
        return out
    marker = trace.name_mask(is_checkpoint_marker, Kind.CPU_OP, Kind.PYTHON, Kind.USER_ANNOTATION)[events]
    tid, ts = ev.tid[events], ev.ts_ns[events]
    nearest = _nearest_marked(tree, backward)[ask]
    in_backward = np.where(nearest >= 0, ts[np.maximum(nearest, 0)], NONE_NS)
    markers = np.flatnonzero(marker & (tree.parent != DROPPED))
    in_marker = _innermost_start(tid, ts, ask, markers, ev.end_ns[events])
    by_site = (in_marker != NONE_NS) & (in_marker >= in_backward)
    seq = ev.sequence[events[ask]]
    carried = np.unique(ev.sequence[events[backward]])
    gradient = trace.name_mask(lambda s: s.endswith("backward"), Kind.CPU_OP)[events[ask]]
    by_sequence = (nearest >= 0) & (seq >= 0) & ~np.isin(seq, carried[carried >= 0]) & ~gradient
    out[ask] = (by_site & ~gradient) | by_sequence
    return out


def _nearest_marked(tree: CallTree, marked: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp]:
    """Each node's nearest ancestor-or-self in ``marked`` (-1: none), one tree level at a time (parents first)."""
    near = np.where(marked, np.arange(len(tree), dtype=np.intp), -1)
    order = np.argsort(tree.depth, kind="stable")
    bounds = np.searchsorted(tree.depth[order], np.arange(int(tree.depth.max(initial=0)) + 2))
    for depth in range(1, bounds.shape[0] - 1):
        level = order[bounds[depth]:bounds[depth + 1]]
        up = near[tree.parent[level]]
        near[level] = np.where(near[level] >= 0, near[level], up)
    return near


def _innermost_start(tid: I64, ts: I64, ask: npt.NDArray[np.intp], containers: npt.NDArray[np.intp],
                     end: I64) -> I64:
    """For each node of ``ask``: the start of the latest-starting node of ``containers`` on its thread whose span
    holds its start (the innermost: tree nodes nest); ``NONE_NS`` where none does."""
    best = np.full(ask.shape[0], NONE_NS, dtype=np.int64)
    if not containers.size:
        return best
    order = np.lexsort((ts[ask], tid[ask]))
    q_tid, q_ts = tid[ask][order], ts[ask][order]
    found = np.full(order.shape[0], NONE_NS, dtype=np.int64)
    for c in containers[np.argsort(ts[containers], kind="stable")].tolist():
        lo = np.searchsorted(q_tid, tid[c], side="left")
        hi = np.searchsorted(q_tid, tid[c], side="right")
        if lo == hi:
            continue
        a = lo + np.searchsorted(q_ts[lo:hi], ts[c], side="left")
        b = lo + np.searchsorted(q_ts[lo:hi], end[c], side="left")
        found[a:b] = ts[c]  # containers in start order: a later (inner) one overwrites an outer one
    best[order] = found
    return best
