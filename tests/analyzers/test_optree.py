"""The call tree, worked out in columns, against the walk it stands for: host events nested one by one on their
thread (a crossing one dropped), each runtime call given to the op its External id names or to the innermost node
that covers it, each node's time given to the node it folds into node by node. Random host events (ties, empty
events, crossing ones, several threads) and runtime calls."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.trace import optree
from gpuscope.model.trace import Events, Kind, MemoryEvents, RankTrace

HOST = (Kind.CPU_OP, Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)


def walk_nest(tid: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each node's parent by the walk: nodes sorted by (thread, start, longer first); a stack of open nodes."""
    parent = [optree.ROOT] * len(tid)
    stack: list[int] = []
    current = None
    for k, (t, s, e) in enumerate(zip(tid.tolist(), ts.tolist(), end.tolist())):
        if t != current:
            stack, current = [], t
        while stack and s >= end[stack[-1]]:
            stack.pop()
        if stack and e > end[stack[-1]]:
            parent[k] = optree.DROPPED
            continue
        parent[k] = stack[-1] if stack else optree.ROOT
        stack.append(k)
    return np.array(parent, dtype=np.intp)


def walk_effective(parent: np.ndarray, folded: np.ndarray, kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Node by node in tree order: a folded node, or an annotation or Python frame inside an op, gives its time to
    its parent's node; the others get depths one below their parent's node."""
    eff, depth = list(range(len(parent))), [-1] * len(parent)
    for k, (p, f) in enumerate(zip(parent.tolist(), folded.tolist())):
        if p == optree.DROPPED:
            continue
        if f or (p >= 0 and kind[k] in (Kind.USER_ANNOTATION, Kind.PYTHON) and kind[eff[p]] == Kind.CPU_OP):
            eff[k] = eff[p]
        else:
            depth[k] = 0 if p == optree.ROOT else depth[eff[p]] + 1
    return np.array(eff, dtype=np.intp), np.array(depth, dtype=np.intp)


def walk_by_op_id(trace: RankTrace, nodes: np.ndarray, parent: np.ndarray, runtime: np.ndarray) -> np.ndarray:
    """The op a runtime call's External id names (its first node in tree order), where it is on the call's thread
    and covers it."""
    ev = trace.events
    first: dict[int, int] = {}
    for k, n in enumerate(nodes.tolist()):
        if ev.kind[n] == Kind.CPU_OP and ev.external_id[n] >= 0 and parent[k] != optree.DROPPED:
            first.setdefault(int(ev.external_id[n]), k)
    out = []
    for r in runtime.tolist():
        k = first.get(int(ev.external_id[r]), -1)
        n = nodes[k] if k >= 0 else -1
        own = k >= 0 and ev.tid[n] == ev.tid[r] and ev.ts_ns[n] <= ev.ts_ns[r] and ev.end_ns[r] <= ev.end_ns[n]
        out.append(k if own else -1)
    return np.array(out, dtype=np.intp)


def walk_by_time(trace: RankTrace, nodes: np.ndarray, parent: np.ndarray, runtime: np.ndarray) -> np.ndarray:
    """The innermost node of a runtime call's thread that covers it: the last node of the thread to start at or
    before it, then up the tree (past a dropped node to the node before it)."""
    ev = trace.events
    out = []
    for r in runtime.tolist():
        earlier = [k for k, n in enumerate(nodes.tolist()) if ev.tid[n] == ev.tid[r] and ev.ts_ns[n] <= ev.ts_ns[r]]
        k = earlier[-1] if earlier else -1
        while k >= 0:
            n = nodes[k]
            if ev.ts_ns[n] <= ev.ts_ns[r] and ev.end_ns[r] <= ev.end_ns[n] and parent[k] != optree.DROPPED:
                break
            k = int(parent[k]) if parent[k] != optree.DROPPED else k - 1
            k = k if k < 0 or ev.tid[nodes[k]] == ev.tid[r] else -1
        out.append(k)
    return np.array(out, dtype=np.intp)


@st.composite
def host_traces(draw: st.DrawFn) -> RankTrace:
    """Host events on up to three threads, on a coarse grid of times so that ties and empty events are common,
    some nested, some crossing; runtime calls among them, some naming an op by External id."""
    rows = []
    for _ in range(draw(st.integers(0, 40))):
        ts = draw(st.integers(0, 30))
        rows.append((ts * 10, draw(st.sampled_from([0, 0, 10, 20, 30, 50, 100, 300])), draw(st.sampled_from(HOST)),
                     draw(st.sampled_from([1, 1, 2, 3])), draw(st.integers(-1, 8))))
    for _ in range(draw(st.integers(0, 15))):
        rows.append((draw(st.integers(0, 300)), draw(st.sampled_from([0, 5, 10])), Kind.RUNTIME,
                     draw(st.sampled_from([1, 2, 3])), draw(st.integers(-1, 8))))
    rows.sort(key=lambda r: r[0])
    n = len(rows)
    ts, dur, kind, tid, ext = (list(c) for c in zip(*rows)) if rows else ([], [], [], [], [])
    events = Events(ts_ns=np.array(ts, np.int64), dur_ns=np.array(dur, np.int64), kind=np.array(kind, np.uint8),
                    name_id=np.array([k % 3 for k in range(n)], np.int32), tid=np.array(tid, np.int64),
                    stream=np.full(n, -1, np.int32), device=np.full(n, -1, np.int32),
                    correlation=np.full(n, -1, np.int64), external_id=np.array(ext, np.int64),
                    bytes=np.full(n, -1, np.int64), blocks_per_sm=np.full(n, np.nan, np.float32),
                    warps_per_sm=np.full(n, np.nan, np.float32))
    memory = MemoryEvents(ts_ns=np.zeros(0, np.int64), bytes=np.zeros(0, np.int64),
                          total_allocated_bytes=np.zeros(0, np.int64), device_type=np.zeros(0, np.int32),
                          device_id=np.zeros(0, np.int32))
    return RankTrace(rank=0, source="built", events=events, memory=memory, names=("a", "b", "c"))


@settings(max_examples=150, deadline=None)
@given(host_traces())
def test_the_call_tree_in_columns_is_the_walk_s(trace: RankTrace) -> None:
    fast = optree.call_tree(trace)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(optree, "_nest", walk_nest)
        mp.setattr(optree, "_by_op_id", walk_by_op_id)
        mp.setattr(optree, "_by_time", walk_by_time)
        mp.setattr(optree, "_effective", walk_effective)
        walked = optree.call_tree(trace)
    for f in dataclasses.fields(fast):
        got, want = getattr(fast, f.name), getattr(walked, f.name)
        assert got.dtype == want.dtype and np.array_equal(got, want), f.name


def test_a_thread_with_a_crossing_event_is_walked_and_the_others_nested_in_columns() -> None:
    # thread 1: [0, 100) holds [10, 20), and [50, 150) crosses it; thread 2: [0, 40) holds [5, 30), which holds
    # the empty [5, 5)
    tid = np.array([1, 1, 1, 2, 2, 2], np.int64)
    ts = np.array([0, 10, 50, 0, 5, 5], np.int64)
    end = np.array([100, 20, 150, 40, 30, 5], np.int64)
    assert optree._nest(tid, ts, end).tolist() == [optree.ROOT, 0, optree.DROPPED, optree.ROOT, 3, 4]
    assert optree._nest(tid, ts, end).tolist() == walk_nest(tid, ts, end).tolist()


@st.composite
def nested_intervals(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """One thread's events that never cross: children inside their parent (some as long as it, some empty, some
    ending where the next starts), sorted as the tree sorts them."""
    rows: list[tuple[int, int]] = []

    def fill(lo: int, hi: int, depth: int) -> None:
        cuts = sorted(draw(st.lists(st.integers(lo, hi), max_size=6 if depth < 4 else 0)))
        for a, b in zip(cuts[::2], cuts[1::2]):
            rows.append((a, b))
            fill(a, b, depth + 1)

    fill(0, 1000, 0)
    rows.sort(key=lambda r: (r[0], -r[1]))
    return np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64)


@settings(max_examples=100, deadline=None)
@given(nested_intervals())
def test_events_that_never_cross_are_nested_in_columns(intervals: tuple[np.ndarray, np.ndarray]) -> None:
    ts, end = intervals
    nested = optree._nest_laminar(ts, end)
    assert nested is not None
    assert nested.tolist() == walk_nest(np.ones_like(ts), ts, end).tolist()
