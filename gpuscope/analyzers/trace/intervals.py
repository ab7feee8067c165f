"""Interval arithmetic on numpy arrays: the one primitive every time breakdown is built from.

An interval set is a pair of int64 arrays (starts, ends), sorted and disjoint once merged.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


class Intervals(NamedTuple):
    starts: I64
    ends: I64

    @property
    def total(self) -> int:
        return int((self.ends - self.starts).sum())

    def __len__(self) -> int:
        return int(self.starts.shape[0])


EMPTY = Intervals(np.empty(0, np.int64), np.empty(0, np.int64))


def unique(values: I64) -> I64:
    """Sorted distinct values. A sort and a mask: numpy's hash-based ``np.unique`` is many times slower
    on the million-element int64 arrays of a large trace."""
    s = np.sort(values, kind="stable")  # timsort: the values are mostly sorted runs (the bounds of merged sets)
    if s.size == 0:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def merge(starts: I64, ends: I64) -> Intervals:
    """The union of possibly overlapping intervals, as sorted disjoint intervals."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return EMPTY
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return Intervals(s[first], reach[last])


def covers(merged: Intervals, points: I64) -> npt.NDArray[np.bool_]:
    """Whether each point lies inside one of the merged intervals (start inclusive, end exclusive)."""
    if len(merged) == 0:
        return np.zeros(points.shape, dtype=bool)
    j = np.searchsorted(merged.starts, points, side="right") - 1
    ok = j >= 0
    out = np.zeros(points.shape, dtype=bool)
    out[ok] = merged.ends[j[ok]] > points[ok]
    return out


def union(*sets: Intervals) -> Intervals:
    """Union of interval sets."""
    return merge(np.concatenate([x.starts for x in sets]), np.concatenate([x.ends for x in sets]))


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two merged interval sets."""
    if len(a) == 0 or len(b) == 0:
        return EMPTY
    if is_merged(a) and is_merged(b):
        return _pairwise(a, b)
    bounds = unique(np.concatenate([a.starts, a.ends, b.starts, b.ends]))
    left, right = bounds[:-1], bounds[1:]
    inside = covers(a, left) & covers(b, left)
    return merge(left[inside], right[inside])


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """The parts of ``a`` not in ``b`` (both merged)."""
    if len(a) == 0 or len(b) == 0:
        return a
    if is_merged(a) and is_merged(b):
        return _pairwise(a, _complement(b))
    bounds = unique(np.concatenate([a.starts, a.ends, b.starts, b.ends]))
    left, right = bounds[:-1], bounds[1:]
    inside = covers(a, left) & ~covers(b, left)
    return merge(left[inside], right[inside])


def is_merged(x: Intervals) -> bool:
    """Whether ``x`` is as ``merge`` leaves a set: sorted, each interval non-empty, a gap between any two."""
    return bool((x.ends > x.starts).all() and (x.starts[1:] > x.ends[:-1]).all())


def _pairwise(a: Intervals, b: Intervals) -> Intervals:
    """The intersection of two merged sets, overlapping pair by overlapping pair: each interval of ``a`` meets a
    run of consecutive intervals of ``b`` (found by binary search, no sort of the bounds). The pieces come out
    sorted, non-empty and with a gap between any two (both sets have one between their own intervals), so they
    are the merged intersection itself."""
    first = np.searchsorted(b.ends, a.starts, side="right")  # the first interval of b ending after a's start
    stop = np.searchsorted(b.starts, a.ends, side="left")  # the first starting at or after a's end
    runs = np.maximum(stop - first, 0)
    total = int(runs.sum())
    if total == 0:
        return EMPTY
    i = np.repeat(np.arange(len(a)), runs)
    offsets = np.cumsum(runs) - runs
    j = first[i] + (np.arange(total) - offsets[i])
    return Intervals(np.maximum(a.starts[i], b.starts[j]), np.minimum(a.ends[i], b.ends[j]))


def _complement(b: Intervals) -> Intervals:
    """Every time outside the merged set ``b``, as a merged set (the int64 range's ends standing for the open
    ends)."""
    starts = np.concatenate(([np.iinfo(np.int64).min], b.ends))
    ends = np.concatenate((b.starts, [np.iinfo(np.int64).max]))
    keep = ends > starts
    return Intervals(starts[keep], ends[keep])


def clip(a: Intervals, start: int, end: int) -> Intervals:
    """``a`` restricted to [start, end)."""
    if len(a) == 0 or end <= start:
        return EMPTY
    s = np.maximum(a.starts, start)
    e = np.minimum(a.ends, end)
    keep = e > s
    return Intervals(s[keep], e[keep])


def overlap_total(a: Intervals, start: int, end: int) -> int:
    """|a ∩ [start, end)| without building the clipped set."""
    return clip(a, start, end).total
