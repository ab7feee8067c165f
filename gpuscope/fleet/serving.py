"""Serving engines in the fleet: their metrics from the Prometheus that scrapes dcgm-exporter, by pod, joined to the
GPUs the same pod holds, so a pod's tokens are priced at its own GPU cost (a MIG slice's, its part of a shared GPU).

One range query per figure, each naming every engine's spelling (``model.serving_names``) joined with ``or`` and
tagged with its engine by ``label_replace`` (in ``gpuscope_engine``: vLLM has an ``engine`` label of its own):

- counters (tokens; a latency histogram's buckets, ``_sum`` and ``_count``): ``last_over_time(NAME[STEP])`` series
  by series, from the window's start: each series' last reading in each bucket, and for tokens its highest too
  (``max_over_time``). Each series' increase is taken here by the rule the live scrape uses
  (``analyzers.serving.counters``: a fall, or a highest above the step's last reading, is a restart counted from 0,
  the climb to the highest before it counted too; a bucket without a reading only lengthens the next interval),
  then the pod's series are added up. What a step's readings cannot show: a process that restarts under a step after
  it started and is back past its last reading when the next step ends, with no reading of it in that step before
  the restart (at most a step's tokens of that series); for a histogram, which has no highest asked, the climb of
  its counts within the step before a restart;
- running and waiting requests: the sum over the pod's engines of ``avg_over_time`` (and ``max_over_time`` for the
  queue's peak); KV-cache use: the mean over its engines of ``avg_over_time``, the maximum of ``max_over_time``;
- latency histograms: each bucket's, sum's and count's increase over the window, added up over the pod's series, read
  by ``analyzers.serving.histograms.read_histogram`` as the live scrape's are.

A pod's figures: tokens per second are its tokens over the seconds its token series' readings span; dollars per
million tokens are its GPUs' cost per second over the seconds they reported, divided by that rate. A series that
cannot be read (values that are not a count, a bucket whose bound is no number) is left out and named in one warning
per pod; the pod's other figures, and the other pods, are reported. A serving query the server refuses (too large,
say) leaves the serving figures it asked for unknown, with a warning, and the GPUs' report whole.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gpuscope.analyzers.serving import advice
from gpuscope.analyzers.serving.counters import increase, readable, reading_span, rises
from gpuscope.analyzers.serving.metrics import counted, histogram, priced, summed_parts
from gpuscope.fleet.answers import PrometheusError, PrometheusTimeout
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
from gpuscope.model.serving import (
    Engine,
    FleetServingData,
    PodHistogram,
    ServingPod,
    ServingSeriesInfo,
    SkippedSeries,
)
from gpuscope.model.serving_names import ENGINE_METRICS, EngineMetric

WAITING_MAX = SERVING_REQUESTS_WAITING + ".max"
_BUSY_FIELDS = {UTIL: "DCGM_FI_DEV_GPU_UTIL", GR_ENGINE: "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
KV_MAX = SERVING_KV_CACHE_USAGE + ".max"
SECONDS = ".seconds"
PEAK = ".peak"
"""A counter's ``NAME.seconds`` row: the seconds of each bucket its series' readings span (NaN outside)."""
COUNTERS = (SERVING_OUTPUT_TOKENS, SERVING_PROMPT_TOKENS)
ENGINE_LABEL = "gpuscope_engine"
_BY = "namespace, pod, exported_namespace, exported_pod"
_ENGINES: tuple[Engine, ...] = ("vllm", "sglang", "tgi")
MAX_POD_WARNINGS = 10
"""Pods named in the fleet's warnings about unreadable serving series; the others are counted in one more line."""
_NOT_A_COUNT = "values that are not a count (NaN, infinite or negative)"


@dataclass(frozen=True)
class ServingQuery:
    """One figure asked of Prometheus: its key in ``FleetServingData.metrics`` (a histogram's name and part), the
    engines' names, the function over each bucket and how the pod's series combine (None: series by series)."""

    key: str
    spec: EngineMetric
    function: str
    combine: str | None = None
    part: str = ""
    """A histogram's series: "_bucket", "_sum" or "_count"."""
    peak_of: str | None = None
    """The counter whose each series' highest reading per step this query asks (``max_over_time``): what it
    climbed to before a restart inside the step."""


def _spec(metric: str) -> EngineMetric:
    return next(m for m in ENGINE_METRICS if m.metric == metric)


QUERIES: tuple[ServingQuery, ...] = (
    *(ServingQuery(c, _spec(c), "last_over_time") for c in COUNTERS),
    *(ServingQuery(c + PEAK, _spec(c), "max_over_time", peak_of=c) for c in COUNTERS),
    ServingQuery(SERVING_REQUESTS_RUNNING, _spec(SERVING_REQUESTS_RUNNING), "avg_over_time", "sum"),
    ServingQuery(SERVING_REQUESTS_WAITING, _spec(SERVING_REQUESTS_WAITING), "avg_over_time", "sum"),
    ServingQuery(WAITING_MAX, _spec(SERVING_REQUESTS_WAITING), "max_over_time", "sum"),
    ServingQuery(SERVING_KV_CACHE_USAGE, _spec(SERVING_KV_CACHE_USAGE), "avg_over_time", "avg"),
    ServingQuery(KV_MAX, _spec(SERVING_KV_CACHE_USAGE), "max_over_time", "max"),
    *(ServingQuery(f"{h}{part}", _spec(h), "last_over_time", None, part)
      for h in SERVING_HISTOGRAMS for part in ("_bucket", "_sum", "_count")),
)
METRICS = (*(q.key for q in QUERIES if not q.part and q.peak_of is None), *(c + SECONDS for c in COUNTERS))


def promql(query: ServingQuery, matchers: str, step_s: float) -> str:
    """Every engine's spelling of the figure, aggregated per pod (gauges) or series by series (counters), tagged
    with its engine."""
    window = f"{round(step_s * 1000)}ms"

    def one(name: str, engine: str) -> str:
        inner = f"{query.function}({name}{query.part}{{{matchers}}}[{window}])"
        if query.combine is not None:
            inner = f"{query.combine} by ({_BY}) ({inner})"
        return f'label_replace({inner}, "{ENGINE_LABEL}", "{engine}", "", "")'

    return " or ".join(one(name, engine) for name, engine in query.spec.names)


def serving_calls(client: Prometheus, window: FleetWindow, matchers: str,
                  ask: Callable[[Prometheus, str, float, int, float], list[Series]],
                  warnings: list[str]) -> dict[str, Callable[[], list[Series]]]:
    """One call per serving query (run beside the GPU queries, under the same deadline). Counters are asked from
    the window's start (their reading there is where the first bucket's increase starts). A query the server
    refuses answers no series and adds a line to ``warnings``; running out of time still ends the command."""
    step_s = window.step_ns / 1e9

    def call(q: ServingQuery) -> list[Series]:
        by_series = q.combine is None
        first_s = (window.start_ns + (0 if by_series else window.step_ns)) / 1e9
        try:
            return ask(client, promql(q, matchers, step_s), first_s, window.buckets + by_series, step_s)
        except PrometheusTimeout:
            raise
        except PrometheusError as exc:
            warnings.append(f"serving figure {q.key} was not read, so it is n/a for every pod ({exc})")
            return []

    return {f"serving:{q.key}": functools.partial(call, q) for q in QUERIES}


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
    covered = np.zeros((len(pods), len(COUNTERS), window.buckets), dtype=bool)
    parts: dict[tuple[int, str], dict[str, dict[str, float | None]]] = {}
    skipped: Counter[tuple[int, str, str]] = Counter()
    peaks = {(q.peak_of, _labels(s.labels)): _bucketed(s, window, 0, window.buckets + 1)
             for q in QUERIES if q.peak_of is not None for s in answers.get(f"serving:{q.key}", [])}
    for q in QUERIES:
        for series in answers.get(f"serving:{q.key}", []) if q.peak_of is None else ():
            info = _info(series.labels)
            if info is None:
                continue
            row = order[(info.namespace, info.pod)]
            if q.combine is not None:
                values[row, METRICS.index(q.key)] = _bucketed(series, window, 1)
                continue
            points = _bucketed(series, window, 0, window.buckets + 1)
            if not readable(series.values).all():
                skipped[(row, _name(q, info.engine), _NOT_A_COUNT)] += 1
            if not q.part:
                _add_counter(values[row, METRICS.index(q.key)], covered[row, COUNTERS.index(q.key)], points,
                             peaks.get((q.key, _labels(series.labels))))
                continue
            part = "le=" + series.labels.get("le", "") if q.part == "_bucket" else q.part.removeprefix("_")
            parts.setdefault((row, q.spec.metric), {}).setdefault(_labels(series.labels), {})[part] = increase(points)
    for c, counter in enumerate(COUNTERS):
        values[:, METRICS.index(counter + SECONDS)] = np.where(covered[:, c], window.step_ns / 1e9, np.nan)
    return FleetServingData(pods=tuple(pods.values()), metrics=METRICS, values=values,
                            histograms=_histograms(parts),
                            skipped=tuple(SkippedSeries(pod=row, metric=name, reason=why, series=n)
                                          for (row, name, why), n in sorted(skipped.items())))


def _labels(labels: dict[str, str]) -> str:
    """A series' identity among the answers (its name and ``le`` aside: ``last_over_time`` keeps the name,
    ``max_over_time`` drops it, and a histogram's parts are one series)."""
    return "\0".join(sorted(f"{k}={v}" for k, v in labels.items() if k not in ("le", "__name__")))


def _add_counter(total: np.ndarray, covered: np.ndarray, points: np.ndarray, peaks: np.ndarray | None) -> None:
    """Add one series' increase in each bucket (``points``: its readings from the window's start, ``peaks`` its
    highest in each step) to the pod's, and mark the buckets its readings span."""
    up = rises(points, peaks)[1:]
    total[:] = np.where(np.isnan(total), up, total + np.nan_to_num(up))
    span = reading_span(points)
    if span is not None and span[1] > span[0]:
        covered[span[0]:span[1]] = True


def _histograms(parts: dict[tuple[int, str], dict[str, dict[str, float | None]]]
                ) -> tuple[PodHistogram, ...]:
    out = []
    for (row, name), series in sorted(parts.items()):
        buckets, sum_s, count = summed_parts(series)
        if buckets:
            out.append(PodHistogram(pod=row, histogram=name, bounds=tuple(b.removeprefix("le=") for b in buckets),
                                    counts=tuple(buckets.values()),
                                    sum_s=sum_s, count=count))
    return tuple(out)


def _name(query: ServingQuery, engine: Engine | None) -> str:
    """The engine's own name of what a query read (``vllm:time_to_first_token_seconds_bucket``)."""
    names = [n for n, e in query.spec.names if e == engine] or [query.spec.metric]
    return names[0] + query.part


def _info(labels: dict[str, str]) -> ServingSeriesInfo | None:
    lower = {k.lower(): v for k, v in labels.items()}
    pod = lower.get("exported_pod") or lower.get("pod")
    if not pod:
        return None
    engine = next((e for e in _ENGINES if e == lower.get(ENGINE_LABEL)), None)
    return ServingSeriesInfo(namespace=lower.get("exported_namespace") or lower.get("namespace") or None, pod=pod,
                             engine=engine)


def _bucketed(series: Series, window: FleetWindow, offset: int, length: int | None = None) -> np.ndarray:
    """The series' values by bucket (``offset`` 1: the first point is the first bucket's; 0: the window's start),
    NaN where it has none; gauges keep only what can be a reading (finite, not negative)."""
    out = np.full(window.buckets if length is None else length, np.nan)
    if not len(series.times_s):
        return out
    with np.errstate(invalid="ignore", over="ignore"):
        position = np.rint((series.times_s * 1e9 - window.start_ns) / window.step_ns) - offset
        ok = np.isfinite(position) & (position >= 0) & (position < len(out))
        if offset:
            ok &= readable(series.values)
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
    def total(metric: str) -> float | None:
        v = serving.metric(metric)[row]
        known = np.isfinite(v)
        return float(v[known].sum()) if known.any() else None

    def gauge(metric: str, reduce: Callable[[np.ndarray], float]) -> float | None:
        v = serving.metric(metric)[row]
        v = v[np.isfinite(v)]
        return float(reduce(v)) if v.size else None

    def seconds(counter: str) -> float | None:
        if counter + SECONDS not in serving.metrics:  # a run saved before: the buckets that have an increase
            known = int(np.isfinite(serving.metric(counter)[row]).sum())
            return known * step_s if known else None
        return total(counter + SECONDS)

    read = {h.histogram: histogram(h.histogram, dict(zip(h.bounds, h.counts)), h.sum_s, h.count, info.engine)
            for h in serving.histograms if h.pod == row}
    ttft, itl, e2e = (read[h][0] if h in read else None for h in SERVING_HISTOGRAMS)
    warnings = (*(f"{s.metric}: {s.series} series with {s.reason}, passed over" for s in serving.skipped
                  if s.pod == row),
                *(w for _, w in read.values() if w is not None))
    metrics = counted(
        engine=info.engine, window_s=seconds(SERVING_OUTPUT_TOKENS) or seconds(SERVING_PROMPT_TOKENS),
        output_tokens=total(SERVING_OUTPUT_TOKENS), prompt_tokens=total(SERVING_PROMPT_TOKENS),
        kv=(gauge(SERVING_KV_CACHE_USAGE, np.mean), gauge(KV_MAX, np.max)),
        running=gauge(SERVING_REQUESTS_RUNNING, np.mean),
        waiting=(gauge(SERVING_REQUESTS_WAITING, np.mean), gauge(WAITING_MAX, np.max)), ttft=ttft, itl=itl, e2e=e2e,
        warnings=warnings)
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


def serving_warnings(pods: Sequence[ServingPod]) -> tuple[str, ...]:
    """One line per pod whose serving series could not all be read (at most ``MAX_POD_WARNINGS``, the rest
    counted), naming the pod and each metric."""
    troubled = [p for p in pods if p.metrics.warnings]
    out = [f"serving pod {p.name}: {'; '.join(p.metrics.warnings)}; its other figures are reported"
           for p in sorted(troubled, key=lambda p: p.name)[:MAX_POD_WARNINGS]]
    if len(troubled) > MAX_POD_WARNINGS:
        out.append(f"{len(troubled) - MAX_POD_WARNINGS} more serving pods have series that could not be read "
                   f"(each pod's serving[].metrics.warnings in --json names them)")
    return tuple(out)


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
