"""Latency percentiles from a Prometheus histogram's buckets, the way ``histogram_quantile`` computes them.

One function for the live scrape and the fleet's Prometheus, so the two give the same percentile from the same
buckets. Buckets are cumulative counts by upper bound (``le``); the quantile's rank is ``q x`` the total
observations; the answer is interpolated linearly inside the first bucket whose count reaches that rank, from the
bucket below's bound (0 for the first bucket) to its own. A rank that falls in the ``+Inf`` bucket answers the
largest finite bound, as Prometheus does. No observations: None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpuscope.model.serving import Latency

PERCENTILES = (0.5, 0.9, 0.99)


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The ``q`` quantile (0..1) of cumulative ``buckets`` (upper bound -> observations at or under it)."""
    bounds = sorted(buckets)
    if not bounds or not math.isinf(bounds[-1]):
        return None  # without +Inf the total is unknown (Prometheus answers NaN)
    counts = [buckets[b] for b in bounds]
    for i in range(1, len(counts)):  # a scrape torn between buckets can dip; cumulative counts never do
        counts[i] = max(counts[i], counts[i - 1])
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    for i, (bound, count) in enumerate(zip(bounds, counts)):
        if count < rank:
            continue
        if math.isinf(bound):
            return bounds[i - 1] if i > 0 else None
        lower, below = (bounds[i - 1], counts[i - 1]) if i > 0 else (0.0 if bound > 0 else bound, 0.0)
        if count == below:
            return bound
        return lower + (bound - lower) * (rank - below) / (count - below)
    return None


def latency(buckets: Mapping[float, float], total_s: float | None, count: float | None) -> Latency | None:
    """Percentiles and mean of one histogram's increase over a window (``count`` left out: its +Inf bucket's);
    None when nothing was observed."""
    count = count if count is not None else buckets.get(math.inf)
    observations = count if count is not None else max(buckets.values(), default=0.0)
    if observations <= 0 and not any(v > 0 for v in buckets.values()):
        return None
    p50, p90, p99 = (quantile(q, buckets) for q in PERCENTILES)
    mean = total_s / count if total_s is not None and count else None
    return Latency(p50_s=p50, p90_s=p90, p99_s=p99, mean_s=mean, observations=float(observations))
