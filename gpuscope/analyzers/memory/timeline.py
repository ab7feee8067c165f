"""A device's allocated (and reserved) bytes over time, cut to a bounded number of points that keep the peak:
each time bucket keeps its lowest and highest point (the min-max idea the dashboard's timelines use)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.memory.history import DeviceHistory
from gpuscope.model.memory import Timeline

BUCKETS = 1000
"""At most 2 x BUCKETS points per device (plus the peak), whatever the recording's length."""


def timeline(h: DeviceHistory, *, buckets: int = BUCKETS) -> Timeline:
    n = len(h)
    reserved = h.reserved_bytes
    if n == 0:
        return Timeline(time_us=(), allocated_bytes=(), reserved_bytes=None if reserved is None else (),
                        points_recorded=0)
    keep = _kept(h, buckets)
    return Timeline(time_us=tuple(h.time_us[keep].tolist()), allocated_bytes=tuple(h.allocated_bytes[keep].tolist()),
                    reserved_bytes=None if reserved is None else tuple(reserved[keep].tolist()), points_recorded=n)


def _kept(h: DeviceHistory, buckets: int) -> npt.NDArray[np.int64]:
    n = len(h)
    if n <= 2 * buckets:
        return np.arange(n)
    # Buckets of equal numbers of events: a recording's times can be missing (0) or bunched.
    bucket = (np.arange(n) * buckets) // n
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    y = h.allocated_bytes
    lows = starts + np.array([int(np.argmin(y[s:e])) for s, e in zip(starts, np.r_[starts[1:], n])])
    highs = starts + np.array([int(np.argmax(y[s:e])) for s, e in zip(starts, np.r_[starts[1:], n])])
    return np.unique(np.concatenate((lows, highs, [0, n - 1, int(np.argmax(y))])))
