"""A server's metrics over a window, and what its tokens cost.

Counters (tokens, a histogram's buckets, sum and count) count since the server started: their increase over the
window is the sum of their rises from one scrape to the next, a fall being a restart (the new value counts whole,
as Prometheus' ``increase`` counts it); a rate is that increase over the time from the first scrape to the last.
Gauges (running and waiting requests, KV-cache use) are means over the scrapes, with their maximum.

Money: every ``usd_per_million_*`` is the GPUs' cost per second over the tokens per second, x 1e6, with the
same cost the run or the pod is charged (its MIG slice's or its part of a shared GPU's). Joules per output token
is the GPUs' mean power over the output tokens per second.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.serving.histograms import latency
from gpuscope.model.schema import (
    SERVING,
    SERVING_HISTOGRAMS,
    SERVING_KV_CACHE_USAGE,
    SERVING_OUTPUT_TOKENS,
    SERVING_PROMPT_TOKENS,
    SERVING_REQUESTS_RUNNING,
    SERVING_REQUESTS_WAITING,
)
from gpuscope.model.serving import Engine, Latency, ServingMetrics

if TYPE_CHECKING:
    import pandas as pd

TTFT, ITL, E2E = SERVING_HISTOGRAMS


def increase(values: npt.NDArray[np.float64]) -> float | None:
    """A counter's increase over its samples (in time order): rises summed, a fall read as a restart from 0."""
    v = values[np.isfinite(values)]
    if v.size < 2:
        return None
    step = np.diff(v)
    return float(np.where(step >= 0, step, v[1:]).sum())


def from_samples(samples: pd.DataFrame | None, engine: Engine | None = None) -> ServingMetrics | None:
    """The server's metrics over a live run's scrapes (source ``serving``); None when there were none."""
    if samples is None or samples.empty:
        return None
    rows = samples[samples["source"] == SERVING]
    if rows.empty:
        return None
    series = {str(m): g.sort_values("ts_ns") for m, g in rows.groupby("metric")}
    times = np.unique(rows["ts_ns"].to_numpy(dtype=np.int64))
    window_s = (int(times[-1]) - int(times[0])) / 1e9 if times.size >= 2 else None

    def grown(metric: str) -> float | None:
        found = series.get(metric)
        return increase(found["value"].to_numpy(dtype=np.float64)) if found is not None else None

    def gauge(metric: str) -> tuple[float | None, float | None]:
        found = series.get(metric)
        if found is None:
            return None, None
        v = found["value"].to_numpy(dtype=np.float64)
        v = v[np.isfinite(v)]
        return (float(v.mean()), float(v.max())) if v.size else (None, None)

    hist = {h: _histogram(h, {m: grown(m) for m in series if m.startswith(h + ".")}) for h in SERVING_HISTOGRAMS}
    kv, kv_max = gauge(SERVING_KV_CACHE_USAGE)
    waiting, waiting_max = gauge(SERVING_REQUESTS_WAITING)
    return counted(engine=engine, window_s=window_s, output_tokens=grown(SERVING_OUTPUT_TOKENS),
                   prompt_tokens=grown(SERVING_PROMPT_TOKENS), kv=(kv, kv_max),
                   running=gauge(SERVING_REQUESTS_RUNNING)[0], waiting=(waiting, waiting_max),
                   ttft=hist[TTFT], itl=hist[ITL], e2e=hist[E2E])


def counted(*, engine: Engine | None, window_s: float | None, output_tokens: float | None,
            prompt_tokens: float | None, kv: tuple[float | None, float | None], running: float | None,
            waiting: tuple[float | None, float | None], ttft: Latency | None, itl: Latency | None,
            e2e: Latency | None) -> ServingMetrics:
    """The metrics of a window from its counters' increases and its gauges' means (live and fleet alike)."""
    def rate(tokens: float | None) -> float | None:
        return tokens / window_s if tokens is not None and window_s else None

    return ServingMetrics(
        engine=engine, window_s=window_s, output_tokens_per_s=rate(output_tokens),
        prompt_tokens_per_s=rate(prompt_tokens), output_tokens=output_tokens, prompt_tokens=prompt_tokens,
        kv_cache_usage=_fraction(kv[0]), kv_cache_usage_max=_fraction(kv[1]), requests_running=running,
        requests_waiting=waiting[0], requests_waiting_max=waiting[1], ttft=ttft, inter_token_latency=itl,
        e2e_latency=e2e)


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


def _histogram(histogram: str, grown: Mapping[str, float | None]) -> Latency | None:
    """One histogram's increase over the window: its buckets by bound, its sum and count."""
    buckets: dict[float, float] = {}
    for metric, value in grown.items():
        suffix = metric.removeprefix(histogram + ".")
        if suffix.startswith("le=") and value is not None:
            bound = suffix.removeprefix("le=")
            buckets[math.inf if bound == "+Inf" else float(bound)] = value
    if not buckets:
        return None
    return latency(buckets, grown.get(f"{histogram}.sum"), grown.get(f"{histogram}.count"))


def _fraction(value: float | None) -> float | None:
    """A KV-cache share, 0..1 as every engine exports it (vLLM's ``_perc`` too); past 1 it is no share: unknown."""
    return value if value is not None and 0.0 <= value <= 1.0 else None
