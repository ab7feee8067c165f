"""A server's metrics over a window, and what its tokens cost.

Counters (tokens, a histogram's buckets, sum and count) count since the server started: their increase over the
window is taken series by series (``analyzers.serving.counters``: the rises from one reading to the next, a fall a
restart whose new value counts whole, as Prometheus' ``increase`` counts it, a missed scrape only a longer interval),
then the series are added up; a rate is that increase over the time from the first scrape to the last. Gauges
(running and waiting requests, KV-cache use) are means over the scrapes, with their maximum. A latency histogram is
read by ``analyzers.serving.histograms.read_histogram``; one that is broken has no figures, and says why.

Money: every ``usd_per_million_*`` is the GPUs' cost per second over the tokens per second, x 1e6, with the
same cost the run or the pod is charged (its MIG slice's or its part of a shared GPU's). Joules per output token
is the GPUs' mean power over the output tokens per second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.serving.counters import increase, total_increase
from gpuscope.analyzers.serving.histograms import read_histogram
from gpuscope.model.schema import (
    SERVING,
    SERVING_HISTOGRAMS,
    SERVING_KV_CACHE_USAGE,
    SERVING_OUTPUT_TOKENS,
    SERVING_PROMPT_TOKENS,
    SERVING_REQUESTS_RUNNING,
    SERVING_REQUESTS_WAITING,
    serving_row_parts,
)
from gpuscope.model.serving import Engine, Latency, ServingMetrics
from gpuscope.model.serving_names import engine_name

if TYPE_CHECKING:
    import pandas as pd

TTFT, ITL, E2E = SERVING_HISTOGRAMS


def from_samples(samples: pd.DataFrame | None, engine: Engine | None = None) -> ServingMetrics | None:
    """The server's metrics over a live run's scrapes (source ``serving``); None when there were none."""
    if samples is None or samples.empty:
        return None
    rows = samples[samples["source"] == SERVING]
    if rows.empty:
        return None
    series: dict[str, dict[str, npt.NDArray[np.float64]]] = {}
    for name, group in rows.groupby("metric"):
        metric, key = serving_row_parts(str(name))
        series.setdefault(metric, {})[key] = group.sort_values("ts_ns")["value"].to_numpy(dtype=np.float64)
    times = np.unique(rows["ts_ns"].to_numpy(dtype=np.int64))
    window_s = (int(times[-1]) - int(times[0])) / 1e9 if times.size >= 2 else None

    def gauge(metric: str) -> tuple[float | None, float | None]:
        v = np.concatenate(list(series.get(metric, {}).values()) or [np.empty(0)])
        v = v[np.isfinite(v)]
        return (float(v.mean()), float(v.max())) if v.size else (None, None)

    read = {h: histogram(h, *summed_parts(_parts(h, series)), engine) for h in SERVING_HISTOGRAMS}
    kv, kv_max = gauge(SERVING_KV_CACHE_USAGE)
    waiting, waiting_max = gauge(SERVING_REQUESTS_WAITING)
    return counted(engine=engine, window_s=window_s,
                   output_tokens=total_increase(series.get(SERVING_OUTPUT_TOKENS, {}).values()),
                   prompt_tokens=total_increase(series.get(SERVING_PROMPT_TOKENS, {}).values()), kv=(kv, kv_max),
                   running=gauge(SERVING_REQUESTS_RUNNING)[0], waiting=(waiting, waiting_max),
                   ttft=read[TTFT][0], itl=read[ITL][0], e2e=read[E2E][0],
                   warnings=tuple(w for _, w in read.values() if w is not None))


def _parts(histogram: str, series: Mapping[str, Mapping[str, npt.NDArray[np.float64]]]
           ) -> dict[str, dict[str, float | None]]:
    """A histogram's series: each one's parts (``le=BOUND``, ``sum``, ``count``) with their increase."""
    out: dict[str, dict[str, float | None]] = {}
    for metric, by_key in series.items():
        if metric.startswith(histogram + "."):
            for key, values in by_key.items():
                out.setdefault(key, {})[metric.removeprefix(histogram + ".")] = increase(values)
    return out


def summed_parts(series: Mapping[str, Mapping[str, float | None]]
                 ) -> tuple[dict[str, float | None], float | None, float | None]:
    """A histogram's buckets (the bound as the server wrote it -> observations), sum and count over the window from
    its series' increases (series -> ``le=BOUND``, ``sum`` or ``count`` -> increase), added up part by part. A series
    with no increase at all (one scrape) is left out; a part one series cannot give is unknown (None)."""
    buckets: dict[str, float | None] = {}
    totals: dict[str, float | None] = {}
    for parts in series.values():
        if all(v is None for v in parts.values()):
            continue
        for part, value in parts.items():
            target, key = (buckets, part.removeprefix("le=")) if part.startswith("le=") else (totals, part)
            before = target.get(key, 0.0)
            target[key] = None if before is None or value is None else before + value
    return buckets, totals.get("sum"), totals.get("count")


def histogram(name: str, buckets: Mapping[str, float | None], sum_s: float | None, count: float | None,
              engine: Engine | None) -> tuple[Latency | None, str | None]:
    """One histogram's figures (``read_histogram``), and a warning naming the engine's metric when a figure is n/a
    for want of sound buckets."""
    if not buckets:
        return None, None
    figures, problem = read_histogram(buckets, sum_s, count)
    if problem is None:
        return figures, None
    what = "its mean is n/a" if figures is not None else "its percentiles and mean are n/a"
    return figures, f"{engine_name(name, engine)}: {problem}; {what} (check the buckets the server exports)"


def counted(*, engine: Engine | None, window_s: float | None, output_tokens: float | None,
            prompt_tokens: float | None, kv: tuple[float | None, float | None], running: float | None,
            waiting: tuple[float | None, float | None], ttft: Latency | None, itl: Latency | None,
            e2e: Latency | None, warnings: tuple[str, ...] = ()) -> ServingMetrics:
    """The metrics of a window from its counters' increases and its gauges' means (live and fleet alike)."""
    def rate(tokens: float | None) -> float | None:
        return tokens / window_s if tokens is not None and window_s else None

    return ServingMetrics(
        engine=engine, window_s=window_s, output_tokens_per_s=rate(output_tokens),
        prompt_tokens_per_s=rate(prompt_tokens), output_tokens=output_tokens, prompt_tokens=prompt_tokens,
        kv_cache_usage=_fraction(kv[0]), kv_cache_usage_max=_fraction(kv[1]), requests_running=running,
        requests_waiting=waiting[0], requests_waiting_max=waiting[1], ttft=ttft, inter_token_latency=itl,
        e2e_latency=e2e, warnings=warnings)


def priced(metrics: ServingMetrics, *, usd_per_hour: float | None, watts: float | None,
           gpu_busy: float | None) -> ServingMetrics:
    """``metrics`` with what its tokens cost at ``usd_per_hour`` (the GPUs' cost rate over the same time) and the
    joules per output token at ``watts``; unknown rates or no tokens leave them None."""
    out, prompt = metrics.output_tokens_per_s, metrics.prompt_tokens_per_s
    usd_per_s = usd_per_hour / 3600 if usd_per_hour is not None else None

    def per_million(tokens_per_s: float | None) -> float | None:
        if usd_per_s is None or tokens_per_s is None or tokens_per_s <= 0:
            return None
        return usd_per_s / tokens_per_s * 1e6

    both = out + prompt if out is not None and prompt is not None else None
    return replace(
        metrics, usd_per_hour=usd_per_hour, usd_per_million_output_tokens=per_million(out),
        usd_per_million_prompt_tokens=per_million(prompt), usd_per_million_tokens=per_million(both),
        joules_per_output_token=watts / out if watts is not None and out else None, gpu_busy=gpu_busy,
        watts=watts)


def _fraction(value: float | None) -> float | None:
    """A KV-cache share, 0..1 as every engine exports it (vLLM's ``_perc`` too); past 1 it is no share: unknown."""
    return value if value is not None and 0.0 <= value <= 1.0 else None
