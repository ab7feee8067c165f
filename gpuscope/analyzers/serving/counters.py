"""A counter's increase, series by series, as Prometheus' ``increase`` counts it: the one rule the live scrape and
the fleet's Prometheus both apply to tokens and to a latency histogram's buckets, sum and count.

A counter counts since its process started. Between two readable samples of one series it rose by their difference;
a fall is a restart, after which the counter counted from 0, so the new value counts whole. A sample that is not a
number, infinite or negative is no reading (a server means nothing by it): it is passed over, as is a missed
scrape, and the next readable sample's rise is taken from the last readable one, so a gap only lengthens the
interval. Series are summed only after each one's increase is taken: the sum of several engines' counters falls
whenever one of them restarts, and reading that fall as a restart of the sum counts the other engines' whole
totals again.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
_SAME = 1e-9
"""Relative difference under which a peak is the last sample itself (the two answers' decimal forms may differ)."""


def readable(values: Floats) -> npt.NDArray[np.bool_]:
    """Which samples are counter readings: finite and not negative."""
    with np.errstate(invalid="ignore"):
        out: npt.NDArray[np.bool_] = np.isfinite(values) & (values >= 0)
    return out


def rises(values: Floats, peaks: Floats | None = None) -> Floats:
    """Each sample's rise since the series' previous readable sample (same shape as ``values``, samples in time
    order along the last axis); NaN for the first readable sample of a series and for every sample that is no
    reading.

    ``peaks``: where each sample stands for a span of raw samples (the last of a query step), the highest of that
    span. A counter only falls at a restart, so a peak above the span's last sample is a restart inside the span,
    even one the last sample has climbed back past the previous reading; at a restart the climb from the previous
    reading to the peak (the last value the old process reached) counts too, as it would from the raw samples."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        if peaks is None:
            return np.stack([rises(row) for row in values]) if len(values) else values.copy()
        return np.stack([rises(row, peak) for row, peak in zip(values, peaks)]) if len(values) else values.copy()
    out = np.full(values.shape, np.nan)
    where = np.flatnonzero(readable(values))
    if where.size >= 2:
        v = values[where]
        step = np.diff(v)
        restart, fallen = step < 0, v[1:]
        if peaks is not None:
            peak = np.asarray(peaks, dtype=np.float64)[where[1:]]
            known = readable(peak)
            with np.errstate(invalid="ignore"):
                restart = restart | (known & (peak > v[1:] + _SAME * np.maximum(1.0, v[1:])))
                fallen = fallen + np.where(known & (peak >= v[:-1]), peak - v[:-1], 0.0)
        out[where[1:]] = np.where(restart, fallen, step)
    return out


def increase(values: Floats) -> float | None:
    """One series' increase over its samples (in time order); None with fewer than two readings."""
    up = rises(values)
    known = np.isfinite(up)
    return float(up[known].sum()) if known.any() else None


def total_increase(series: Iterable[Floats]) -> float | None:
    """The increase of several series of one counter (engines, models): each one's own, then summed; None when no
    series has two readings."""
    found = [i for i in (increase(v) for v in series) if i is not None]
    return float(sum(found)) if found else None


def reading_span(values: Floats) -> tuple[int, int] | None:
    """The indices of a series' first and last readable samples; None without any."""
    where = np.flatnonzero(readable(np.asarray(values, dtype=np.float64)))
    return (int(where[0]), int(where[-1])) if where.size else None
