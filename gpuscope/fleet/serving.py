"""Serving engines in the fleet: their metrics from the Prometheus that scrapes dcgm-exporter, by pod, joined to the
GPUs the same pod holds, so a pod's tokens are priced at its own GPU cost (a MIG slice's, its part of a shared GPU).

One range query per figure, aggregated by Prometheus per pod and bucket, each naming every engine's spelling
(``model.serving_names``) joined with ``or`` and tagged with its engine by ``label_replace``:

- tokens: ``sum by (namespace, pod) (increase(vllm:generation_tokens_total[STEP]))``: the bucket's increase;
- running and waiting requests: the sum over the pod's engines of ``avg_over_time`` (and ``max_over_time`` for the
  queue's peak); KV-cache use: the mean over its engines of ``avg_over_time``, the maximum of ``max_over_time``;
- latency histograms: ``sum by (namespace, pod, le) (increase(..._bucket[STEP]))`` and the ``_sum``'s increase,
  added up over the window; percentiles as ``histogram_quantile`` takes them (``analyzers.serving.histograms``).

A pod's figures: tokens per second are its tokens over the seconds of the buckets that have them; dollars per
million tokens are its GPUs' cost per second over the seconds they reported, divided by that rate.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gpuscope.analyzers.serving import advice
from gpuscope.analyzers.serving.histograms import latency
from gpuscope.analyzers.serving.metrics import counted, priced
from gpuscope.fleet.prometheus import Prometheus, Series
from gpuscope.model.diagnosis import Recommendation
from gpuscope.model.fleet import GR_ENGINE, UTIL, FleetData, FleetWindow, GpuUsage
from gpuscope.model.schema import (
    SERVING_HISTOGRAMS,
    SERVING_KV_CACHE_USAGE,
    SERVING_OUTPUT_TOKENS,
    SERVING_PROMPT_TOKENS,
    SERVING_REQUESTS_RUNNING,
    SERVING_REQUESTS_WAITING,
)
from gpuscope.model.serving import Engine, FleetServingData, PodHistogram, ServingPod, ServingSeriesInfo
from gpuscope.model.serving_names import ENGINE_METRICS, EngineMetric

WAITING_MAX = SERVING_REQUESTS_WAITING + ".max"
_BUSY_FIELDS = {UTIL: "DCGM_FI_DEV_GPU_UTIL", GR_ENGINE: "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
KV_MAX = SERVING_KV_CACHE_USAGE + ".max"
_BY = "namespace, pod"
_ENGINES: tuple[Engine, ...] = ("vllm", "sglang", "tgi")


@dataclass(frozen=True)
class ServingQuery:
    """One figure asked of Prometheus: its key in ``FleetServingData.metrics`` (a histogram's name and part), the
    engines' names, the function over each bucket and how the pod's series combine."""

    key: str
    spec: EngineMetric
    function: str
    combine: str
    part: str = ""
    """A histogram's series: "_bucket" or "_sum"."""


def _spec(metric: str) -> EngineMetric:
    return next(m for m in ENGINE_METRICS if m.metric == metric)


QUERIES: tuple[ServingQuery, ...] = (
    ServingQuery(SERVING_OUTPUT_TOKENS, _spec(SERVING_OUTPUT_TOKENS), "increase", "sum"),
    ServingQuery(SERVING_PROMPT_TOKENS, _spec(SERVING_PROMPT_TOKENS), "increase", "sum"),
    ServingQuery(SERVING_REQUESTS_RUNNING, _spec(SERVING_REQUESTS_RUNNING), "avg_over_time", "sum"),
    ServingQuery(SERVING_REQUESTS_WAITING, _spec(SERVING_REQUESTS_WAITING), "avg_over_time", "sum"),
    ServingQuery(WAITING_MAX, _spec(SERVING_REQUESTS_WAITING), "max_over_time", "sum"),
    ServingQuery(SERVING_KV_CACHE_USAGE, _spec(SERVING_KV_CACHE_USAGE), "avg_over_time", "avg"),
    ServingQuery(KV_MAX, _spec(SERVING_KV_CACHE_USAGE), "max_over_time", "max"),
    *(ServingQuery(f"{h}{part}", _spec(h), "increase", "sum", part)
      for h in SERVING_HISTOGRAMS for part in ("_bucket", "_sum")),
)
METRICS = tuple(q.key for q in QUERIES if not q.part)


def promql(query: ServingQuery, matchers: str, step_s: float) -> str:
    """Every engine's spelling of the figure, aggregated per pod (and bucket bound) and tagged with its engine."""
    window = f"{round(step_s * 1000)}ms"
    by = _BY + (", le" if query.part == "_bucket" else "")
    return " or ".join(
        f'label_replace({query.combine} by ({by}) ({query.function}({name}{query.part}{{{matchers}}}[{window}])), '
        f'"engine", "{engine}", "", "")' for name, engine in query.spec.names)


def serving_calls(client: Prometheus, window: FleetWindow, matchers: str,
                  ask: Callable[[Prometheus, str, float, int, float], list[Series]]
                  ) -> dict[str, functools.partial[list[Series]]]:
    """One call per serving query (run beside the GPU queries, under the same deadline)."""
    step_s = window.step_ns / 1e9
    first_s = (window.start_ns + window.step_ns) / 1e9
    return {f"serving:{q.key}": functools.partial(ask, client, promql(q, matchers, step_s), first_s, window.buckets,
                                                  step_s) for q in QUERIES}


def join_serving(answers: dict[str, list[Series]], window: FleetWindow) -> FleetServingData | None:
    """The pods' serving series from the answers (keys ``serving:KEY``); None when no pod serves."""
    pods: dict[tuple[str | None, str], ServingSeriesInfo] = {}
    for q in QUERIES:
        for series in answers.get(f"serving:{q.key}", []):
            info = _info(series.labels)
            if info is not None:
                pods.setdefault((info.namespace, info.pod), info)
    if not pods:
        return None
    order = {key: i for i, key in enumerate(pods)}
    values = np.full((len(pods), len(METRICS), window.buckets), np.nan)
    hist: dict[tuple[int, str], dict[str, float]] = {}
    sums: dict[tuple[int, str], float] = {}
    for q in QUERIES:
        for series in answers.get(f"serving:{q.key}", []):
            info = _info(series.labels)
            if info is None:
                continue
            row = order[(info.namespace, info.pod)]
            points = _bucketed(series, window)
            if not q.part:
                values[row, METRICS.index(q.key)] = points
            elif q.part == "_bucket":
                le = series.labels.get("le")
                if le is not None:
                    per = hist.setdefault((row, q.spec.metric), {})
                    per[le] = per.get(le, 0.0) + float(np.nansum(points))
            else:
                sums[(row, q.spec.metric)] = sums.get((row, q.spec.metric), 0.0) + float(np.nansum(points))
    histograms = tuple(
        PodHistogram(pod=row, histogram=name, bounds=tuple(b for b in per), counts=tuple(per.values()),
                     sum_s=sums.get((row, name))) for (row, name), per in sorted(hist.items()))
    return FleetServingData(pods=tuple(pods.values()), metrics=METRICS, values=values, histograms=histograms)


def _info(labels: dict[str, str]) -> ServingSeriesInfo | None:
    lower = {k.lower(): v for k, v in labels.items()}
    pod = lower.get("exported_pod") or lower.get("pod")
    if not pod:
        return None
    engine = next((e for e in _ENGINES if e == lower.get("engine")), None)
    return ServingSeriesInfo(namespace=lower.get("exported_namespace") or lower.get("namespace") or None, pod=pod,
                             engine=engine)


def _bucketed(series: Series, window: FleetWindow) -> np.ndarray:
    out = np.full(window.buckets, np.nan)
    if not len(series.times_s):
        return out
    with np.errstate(invalid="ignore", over="ignore"):
        position = np.rint((series.times_s * 1e9 - window.start_ns) / window.step_ns) - 1
        ok = np.isfinite(position) & (position >= 0) & (position < window.buckets) & np.isfinite(series.values) \
            & (series.values >= 0)
    out[position[ok].astype(np.int64)] = series.values[ok]
    return out


def serving_pods(data: FleetData, usages: Sequence[GpuUsage], busy: np.ndarray) -> tuple[ServingPod, ...]:
    """Each serving pod's metrics, priced at the GPUs the same pod holds (``busy``: each GPU series' busy share by
    bucket, NaN where it did not report); most output tokens first."""
    serving = data.serving
    if serving is None:
        return ()
    step_s = data.window.step_ns / 1e9
    out = []
    for row, info in enumerate(serving.pods):
        mine = [g for g, u in enumerate(usages) if u.info.pod == info.pod
                and (info.namespace is None or u.info.namespace == info.namespace)]
        out.append(_pod(serving, row, info, [usages[g] for g in mine], busy[mine] if mine else None, step_s))
    return tuple(sorted(out, key=lambda p: (-(p.metrics.output_tokens_per_s or 0.0), p.name)))


def _pod(serving: FleetServingData, row: int, info: ServingSeriesInfo, usages: list[GpuUsage],
         busy: np.ndarray | None, step_s: float) -> ServingPod:
    def total(metric: str) -> tuple[float | None, int]:
        v = serving.metric(metric)[row]
        known = np.isfinite(v)
        return (float(v[known].sum()) if known.any() else None), int(known.sum())

    def gauge(metric: str, reduce: Callable[[np.ndarray], float]) -> float | None:
        v = serving.metric(metric)[row]
        v = v[np.isfinite(v)]
        return float(reduce(v)) if v.size else None

    output, buckets = total(SERVING_OUTPUT_TOKENS)
    prompt, _ = total(SERVING_PROMPT_TOKENS)
    lat = {h.histogram: latency({math.inf if b == "+Inf" else float(b): c for b, c in zip(h.bounds, h.counts)},
                                h.sum_s, None) for h in serving.histograms if h.pod == row}
    ttft, itl, e2e = (lat.get(h) for h in SERVING_HISTOGRAMS)
    metrics = counted(
        engine=info.engine, window_s=buckets * step_s if buckets else None, output_tokens=output,
        prompt_tokens=prompt, kv=(gauge(SERVING_KV_CACHE_USAGE, np.mean), gauge(KV_MAX, np.max)),
        running=gauge(SERVING_REQUESTS_RUNNING, np.mean),
        waiting=(gauge(SERVING_REQUESTS_WAITING, np.mean), gauge(WAITING_MAX, np.max)), ttft=ttft, itl=itl, e2e=e2e)
    cost, wall_s = _cost(usages, busy, step_s)
    hours = sum(u.hours for u in usages)
    busy_share = sum(u.busy * u.hours for u in usages if u.busy is not None) / hours if hours > 0 and all(
        u.busy is not None for u in usages if u.hours > 0) else None
    energies = [u.energy_kwh for u in usages if u.hours > 0]
    watts = sum(e for e in energies if e is not None) * 3.6e6 / wall_s if wall_s and energies and \
        None not in energies else None
    metrics = priced(metrics, usd_per_hour=cost / (wall_s / 3600) if cost is not None and wall_s else None,
                     watts=watts, gpu_busy=busy_share)
    name = f"{info.namespace}/{info.pod}" if info.namespace else info.pod
    sources = sorted({_BUSY_FIELDS.get(u.source or "", u.source or "") for u in usages if u.source})
    return ServingPod(name=name, namespace=info.namespace, pod=info.pod, gpus=len(usages), gpu_hours=hours,
                      cost_usd=cost, metrics=metrics,
                      models=tuple(sorted({u.info.model for u in usages if u.info.model})),
                      mig_profiles=tuple(sorted({u.info.mig_profile for u in usages if u.info.mig_profile})),
                      busy_source=", ".join(sources) or None)


def _cost(usages: list[GpuUsage], busy: np.ndarray | None, step_s: float) -> tuple[float | None, float | None]:
    """The pod's GPU cost over the window (None when a price is unknown or it holds no GPU) and the seconds its GPU
    series reported (the buckets in which any did)."""
    if not usages or busy is None:
        return None, None
    wall_s = float(np.isfinite(busy).any(axis=0).sum()) * step_s
    if any(u.usd_per_gpu_hour is None for u in usages if u.hours > 0):
        return None, wall_s
    return sum(u.hours * (u.usd_per_gpu_hour or 0.0) for u in usages), wall_s


def serving_advice(pods: Sequence[ServingPod]) -> tuple[Recommendation, ...]:
    """The serving advice of every pod (``analyzers.serving.advice``), priced at its cost over the window."""
    return tuple(r for pod in pods for r in advice.advise(pod.metrics, who=pod.name, cost_usd=pod.cost_usd,
                                                          busy_metric=pod.busy_source or "DCGM"))
