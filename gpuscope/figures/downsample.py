"""Server-side downsampling of long time series that keeps every peak.

A 24-hour run sampled at 1 Hz has 86,400 points per GPU and metric: far more than a chart has
pixels. Each series is cut into equal-width time buckets and only each bucket's minimum and
maximum are kept (the M4 / min-max idea), in time order, so a one-second spike to 100% or a dip
to 0% survives at any zoom-out while the point count is bounded by ``2 * buckets``. Vectorised
with numpy: one pass of ``reduceat`` per series, no Python loop over points.

Gaps in the recording (a collector paused, a GPU that stopped reporting) are kept as gaps: a NaN
is put between the points on either side, so the line breaks instead of drawing a straight line
across time nobody measured.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DEFAULT_BUCKETS = 600
"""About one bucket per two pixels of a full-width chart: two points per bucket fill it."""
GAP_FACTOR = 5.0
"""A step between samples longer than this many median steps is a gap in the recording."""


def minmax_indices(x: npt.NDArray[np.generic], y: FloatArray, *, buckets: int) -> IntArray:
    """Indices of the points to keep: each time bucket's first minimum and first maximum, sorted.

    ``x`` must be sorted and ``y`` free of NaN. The first and last points are always kept.
    """
    n = len(x)
    if n <= max(2 * buckets, 2):
        return np.arange(n, dtype=np.int64)
    offset = (x - x[0]).astype(np.float64)
    span = float(offset[-1]) or 1.0
    bucket = np.minimum((offset * (buckets / span)).astype(np.int64), buckets - 1)
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    segment = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    lows = _first_where(y == np.minimum.reduceat(y, starts)[segment], segment)
    highs = _first_where(y == np.maximum.reduceat(y, starts)[segment], segment)
    return np.union1d(np.union1d(lows, highs), [0, n - 1]).astype(np.int64)


def _first_where(mask: npt.NDArray[np.bool_], segment: IntArray) -> IntArray:
    """For each segment, the first index where ``mask`` holds."""
    idx = np.flatnonzero(mask)
    seg = segment[idx]
    return idx[np.r_[True, seg[1:] != seg[:-1]]]


def gap_mask(x: npt.NDArray[np.generic], *, factor: float = GAP_FACTOR) -> npt.NDArray[np.bool_]:
    """``mask[i]`` is True when the step from point i to i + 1 is a gap in the recording."""
    if len(x) < 3:
        return np.zeros(max(len(x) - 1, 0), dtype=bool)
    step = np.diff(x).astype(np.float64)
    median = float(np.median(step))
    if median <= 0:
        return np.zeros(len(step), dtype=bool)
    return step > factor * median


def downsample(x: npt.NDArray[np.generic], y: npt.ArrayLike, *,
               buckets: int = DEFAULT_BUCKETS) -> tuple[FloatArray, FloatArray]:
    """Min/max-per-bucket downsampling of one series, with NaN breaks at recording gaps.

    ``x`` (sorted; any numeric or datetime64 dtype) is returned as float64 in its own units, ``y`` as
    float64. NaN values of ``y`` are dropped first: a missing sample is not a value.
    """
    xs = np.asarray(x)
    ys = np.asarray(y, dtype=np.float64)
    valid = ~np.isnan(ys)
    if not valid.all():
        xs, ys = xs[valid], ys[valid]
    if xs.dtype.kind == "M":
        xs = xs.astype("datetime64[ns]").astype(np.int64)
    gaps = gap_mask(xs)
    keep = minmax_indices(xs, ys, buckets=buckets)
    x_out = xs[keep].astype(np.float64)
    y_out = ys[keep]
    if gaps.any() and len(keep) > 1:
        # Gaps between two consecutive kept points a < b: raw gaps at indices a .. b-1.
        counts = np.r_[0, np.cumsum(gaps)]
        between = np.flatnonzero(counts[keep[1:]] - counts[keep[:-1]] > 0) + 1
        x_out = np.insert(x_out, between, (x_out[between - 1] + x_out[between]) / 2)
        y_out = np.insert(y_out, between, np.nan)
    return x_out, y_out
