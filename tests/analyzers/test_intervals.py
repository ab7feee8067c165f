"""Interval arithmetic against a brute-force model on a small integer grid."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpuscope.analyzers.trace import breakdown
from gpuscope.analyzers.trace.intervals import (
    Intervals,
    clip,
    covers,
    intersect,
    is_merged,
    merge,
    subtract,
    union,
)

GRID = 60
spans = st.lists(st.tuples(st.integers(0, GRID), st.integers(0, GRID)), max_size=12)


def build(pairs: list[tuple[int, int]]) -> Intervals:
    s = np.array([min(a, b) for a, b in pairs], dtype=np.int64)
    e = np.array([max(a, b) for a, b in pairs], dtype=np.int64)
    return merge(s, e)


def cells(x: Intervals) -> set[int]:
    return {t for s, e in zip(x.starts.tolist(), x.ends.tolist()) for t in range(s, e)}


def raw_cells(pairs: list[tuple[int, int]]) -> set[int]:
    return {t for a, b in pairs for t in range(min(a, b), max(a, b))}


@given(spans)
def test_merge_is_sorted_disjoint_and_covers_the_same_time(pairs: list[tuple[int, int]]) -> None:
    m = build(pairs)
    assert (m.ends > m.starts).all()
    assert (m.starts[1:] > m.ends[:-1]).all()
    assert cells(m) == raw_cells(pairs) and m.total == len(raw_cells(pairs))


@given(spans, spans)
def test_set_operations(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    x, y = build(a), build(b)
    assert cells(intersect(x, y)) == raw_cells(a) & raw_cells(b)
    assert cells(subtract(x, y)) == raw_cells(a) - raw_cells(b)
    assert cells(union(x, y)) == raw_cells(a) | raw_cells(b)
    for result in (intersect(x, y), subtract(x, y)):  # in merge's form: the same arrays as merging the cells
        assert is_merged(result) and result.starts.dtype == result.ends.dtype == np.int64


@given(spans, st.integers(0, GRID), st.integers(0, GRID))
def test_clip(a: list[tuple[int, int]], lo: int, hi: int) -> None:
    assert cells(clip(build(a), lo, hi)) == {t for t in raw_cells(a) if lo <= t < hi}


@given(spans, st.lists(st.integers(0, GRID), max_size=8))
def test_coverage_of_the_pieces_between_bounds_is_covers_of_their_left_ends(a: list[tuple[int, int]],
                                                                           more: list[int]) -> None:
    """The step breakdown's coverage by a running count over the bounds, against a binary search per piece."""
    x = build(a)
    bounds = np.unique(np.concatenate([x.starts, x.ends, np.array(more, dtype=np.int64)]))
    assert np.array_equal(breakdown._covering(x, bounds), covers(x, bounds[:-1]))
