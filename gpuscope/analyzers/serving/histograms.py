"""A latency histogram over a window, read and checked: its percentiles the way ``histogram_quantile`` computes
them, its mean, or why it has none.

One function (``read_histogram``) for the live scrape and the fleet's Prometheus, so the two give the same answer,
or the same refusal, from the same buckets. It takes each bucket's increase over the window by its bound as the
server wrote it (``le``), and the increases of ``_sum`` and ``_count``.

What a server's histogram must be: every bound a number (``+Inf`` included), none below 0 (a latency is not) and no
bound twice; a ``+Inf`` bucket (without it the total is unknown: Prometheus answers NaN); counts that are readable,
and cumulative: never fewer at a larger bound. ``_count`` is the ``+Inf`` bucket's count (within 1% and one
observation: a scrape may read them a moment apart). A histogram that breaks one of these has no percentiles and no
mean: a value read from it could be anything, a negative latency among them. A ``_sum`` below 0, or one whose mean
lies past the largest finite bound when every observation lies under it, leaves only the mean unknown.

Percentiles: the quantile's rank is ``q x`` the observations; the answer is interpolated linearly inside the first
bucket whose count reaches that rank, from the bucket below's bound (0 for the first bucket) to its own. A rank that
falls in the ``+Inf`` bucket answers the largest finite bound, as Prometheus does. No observations: no figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpuscope.model.serving import Latency
from gpuscope.model.serving_names import bucket_bound, shown_label

PERCENTILES = (0.5, 0.9, 0.99)
COUNT_TOLERANCE = 0.01
"""How far ``_count`` may stray from the ``+Inf`` bucket (a share of it, and at least one observation)."""


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The ``q`` quantile (0..1) of cumulative ``buckets`` (upper bound -> observations at or under it), which
    ``read_histogram`` has checked; None without a ``+Inf`` bucket or observations."""
    bounds = sorted(buckets)
    if not bounds or not math.isinf(bounds[-1]):
        return None
    counts = [buckets[b] for b in bounds]
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    for i, (bound, count) in enumerate(zip(bounds, counts)):
        if count < rank:
            continue
        if math.isinf(bound):
            return bounds[i - 1] if i > 0 else None
        lower, below = (bounds[i - 1], counts[i - 1]) if i > 0 else (0.0, 0.0)
        if count == below:
            return bound
        return lower + (bound - lower) * (rank - below) / (count - below)
    return None


def read_histogram(buckets: Mapping[str, float | None], sum_s: float | None,
                   count: float | None) -> tuple[Latency | None, str | None]:
    """A histogram's figures over a window from its buckets' increase (``le`` as written -> observations at or
    under it), its ``_sum``'s and ``_count``'s (None where unknown), and why a figure is n/a (one phrase, or None).
    None for the figures when nothing was observed or the histogram is broken."""
    checked, problem = _checked_buckets(buckets)
    if checked is None:
        return None, problem
    total = checked[math.inf]
    problem = _count_problem(count, total)
    if problem is not None:
        return None, problem
    if total <= 0:
        return None, None
    p50, p90, p99 = (quantile(q, checked) for q in PERCENTILES)
    mean, problem = _mean(checked, sum_s, total)
    return Latency(p50_s=p50, p90_s=p90, p99_s=p99, mean_s=mean, observations=float(total)), problem


def _checked_buckets(buckets: Mapping[str, float | None]) -> tuple[dict[float, float] | None, str | None]:
    """The buckets by numeric bound, or None and the first thing wrong with them."""
    out: dict[float, float] = {}
    for le, value in buckets.items():
        bound = bucket_bound(le)
        shown = shown_label(le)
        if bound is None:
            return None, f'a bucket\'s bound le="{shown}" is not a number'
        if bound < 0:
            return None, f'a bucket\'s bound le="{shown}" is below 0, which no latency is'
        if bound in out:
            return None, f"two buckets have the bound {shown}"
        if value is None or not math.isfinite(value) or value < 0:
            return None, f'the count of bucket le="{shown}" could not be read'
        out[bound] = value
    if not out:
        return None, None
    if math.inf not in out:
        return None, 'it has no le="+Inf" bucket, so its total is unknown'
    bounds = sorted(out)
    for lower, upper in zip(bounds, bounds[1:]):
        if out[upper] < out[lower] - 1e-9 * max(1.0, out[lower]):
            return None, (f"its buckets are not cumulative: le={_le(upper)} counts {out[upper]:g}, fewer than "
                          f"le={_le(lower)} ({out[lower]:g})")
    return out, None


def _count_problem(count: float | None, total: float) -> str | None:
    if count is None:
        return None
    if not math.isfinite(count) or count < 0:
        return f"its _count is not a count ({count})"
    if abs(count - total) > max(1.0, COUNT_TOLERANCE * total):
        return f"its _count ({count:g}) disagrees with its +Inf bucket ({total:g} observations)"
    return None


def _mean(buckets: dict[float, float], sum_s: float | None, total: float) -> tuple[float | None, str | None]:
    if sum_s is None or not math.isfinite(sum_s):
        return None, None
    if sum_s < 0:
        return None, f"its _sum fell by {-sum_s:g} s over the window, which a sum of latencies cannot: mean n/a"
    mean = sum_s / total
    finite = [b for b in buckets if math.isfinite(b)]
    largest = max(finite, default=None)
    if largest is not None and buckets[largest] >= buckets[math.inf] and mean > largest * (1 + 1e-9):
        return None, (f"its _sum gives a mean of {mean:g} s, past its largest bound ({largest:g} s) though every "
                      f"observation lies under it: mean n/a")
    return mean, None


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else f"{bound:g}"

