"""Fleet data from Prometheus: one range query per metric over every dcgm-exporter series, aggregated server-side.

Each query asks for ``avg_over_time`` (``max_over_time`` for memory, ``increase`` for the energy counter) over
buckets of one step, so Prometheus does the per-sample work and answers one number per GPU per bucket: 1,000 GPUs
over 24 h at a 2-minute step is 720 points a series, whatever the scrape interval. A bucket with no sample has no
point, so gaps stay gaps. Where a server refuses a query as loading too many samples at once (HTTP 422), the
time range is split in halves until each part passes. Metric names, label spellings, sentinels and units are
dcgm-exporter's, as the DCGM collector reads them (``gpuscope.collectors.dcgm``).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

import numpy as np

from gpuscope.collectors.dcgm_fields import FIELDS, OLD_NAMES, Field, device_of, field_value
from gpuscope.fleet.prometheus import Prometheus, PrometheusError, QueryTooLarge, Series
from gpuscope.fleet.serving import join_serving, serving_calls
from gpuscope.model.fleet import (
    DRAM_ACTIVE,
    ENERGY_J,
    GR_ENGINE,
    MEMORY_USED_BYTES,
    POD_SM_UTIL,
    POWER_W,
    SM_ACTIVE,
    SM_OCCUPANCY,
    TENSOR_ACTIVE,
    UTIL,
    FleetData,
    FleetWindow,
    GpuSeriesInfo,
)

TARGET_POINTS = 720
"""Points per series the default step aims at (Prometheus refuses more than 11,000)."""
MIN_STEP_S = 60
"""The default step never goes below Prometheus' default scrape interval, so every bucket can hold a sample."""
_EXPORTED = ("pod", "namespace", "container")
_SENTINEL_FLOOR = 0x7FFFFFF0
"""The smallest of DCGM's "blank" sentinels (int32 ones); values below it are never one."""


@dataclass(frozen=True)
class MetricQuery:
    """How one fleet metric is asked for: the exporter's names (first preferred), the aggregation, the DCGM field."""

    metric: str
    field_key: str
    function: str = "avg_over_time"
    own_names: tuple[str, ...] = ()
    """Names for a series that is not a DCGM field (then ``own_field`` says how to read it)."""
    own_field: Field | None = None

    @property
    def field(self) -> Field:
        return self.own_field or FIELDS[self.field_key]

    @property
    def names(self) -> tuple[str, ...]:
        if self.own_names:
            return self.own_names
        old = [name for name, key in OLD_NAMES.items() if key == self.field_key]
        return ("DCGM_FI_" + self.field_key.upper(), *old)


QUERIES: tuple[MetricQuery, ...] = (
    MetricQuery(UTIL, "dev_gpu_util"),
    MetricQuery(GR_ENGINE, "prof_gr_engine_active"),
    MetricQuery(SM_ACTIVE, "prof_sm_active"),
    MetricQuery(DRAM_ACTIVE, "prof_dram_active"),
    MetricQuery(TENSOR_ACTIVE, "prof_pipe_tensor_active"),
    MetricQuery(SM_OCCUPANCY, "prof_sm_occupancy"),
    MetricQuery(MEMORY_USED_BYTES, "dev_fb_used", "max_over_time"),
    MetricQuery(POWER_W, "dev_power_usage"),
    MetricQuery(ENERGY_J, "dev_total_energy_consumption", "increase"),
    # A pod's own SM share of a time-sliced GPU, as a per-pod collector for dcgm-exporter names it
    # (NVIDIA/dcgm-exporter#587): NVML per-process utilisation joined to the pods, in percent.
    MetricQuery(POD_SM_UTIL, "", own_names=("dcgm_fi_dev_sm_util_per_pod", "DCGM_FI_DEV_SM_UTIL_PER_POD"),
                own_field=Field(POD_SM_UTIL, 0.01, fraction=True)),
)
BUSY_METRICS = (UTIL, GR_ENGINE)
"""A GPU enters the fleet through one of these; the other metrics are joined onto it."""


def choose_step_s(window_s: float, step_s: float | None = None) -> float:
    """``step_s`` when given; else the window over ``TARGET_POINTS``, rounded up to whole minutes."""
    if step_s is not None:
        return step_s
    return max(MIN_STEP_S, math.ceil(window_s / TARGET_POINTS / 60) * 60)


def plan_window(start_s: float, end_s: float, step_s: float) -> FleetWindow:
    """Whole steps ending at ``end_s`` (a partial step at the start is left out)."""
    if end_s <= start_s:
        raise PrometheusError("the window is empty: --end must come after --start")
    if step_s <= 0:
        raise PrometheusError("--step must be positive")
    buckets = int((end_s - start_s) // step_s)
    if buckets < 1:
        raise PrometheusError(f"the window ({end_s - start_s:g} s) is shorter than one step ({step_s:g} s)")
    step_ns = round(step_s * 1e9)
    return FleetWindow(start_ns=round(end_s * 1e9) - buckets * step_ns, step_ns=step_ns, buckets=buckets)


def promql(query: MetricQuery, selector: str, step_s: float) -> str:
    """e.g. ``avg_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="ml"}[60s]) or avg_over_time(dcgm_gpu_utilization...)``."""
    matchers = normalize_selector(selector)
    window = f"{round(step_s * 1000)}ms"
    return " or ".join(f"{query.function}({name}{{{matchers}}}[{window}])" for name in query.names)


def normalize_selector(selector: str) -> str:
    """The matchers without surrounding braces: ``{a="b"}`` and ``a="b"`` are the same selector."""
    text = selector.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    return text


def fetch_fleet(client: Prometheus, window: FleetWindow, selector: str = "", *,
                queries: Sequence[MetricQuery] = QUERIES, workers: int = 4) -> FleetData:
    """Every metric of every GPU the selector matches, bucket by bucket; raises ``PrometheusError``."""
    step_s = window.step_ns / 1e9
    start_s = (window.start_ns + window.step_ns) / 1e9

    def run(query: MetricQuery) -> list[Series]:
        return _range(client, promql(query, selector, step_s), start_s, window.buckets, step_s)

    calls: dict[str, Callable[[], list[Series]]] = {q.metric: functools.partial(run, q) for q in queries}
    refused: list[str] = []  # a serving query the server refused: those figures n/a, the GPUs' report whole
    calls.update(serving_calls(client, window, normalize_selector(selector), _range, refused))  # vLLM, SGLang, TGI
    answers = _all_or_none(client, calls, workers)
    data = join_answers(answers, window, selector, url=client.url, warnings=[*client.warnings, *refused],
                        queries=queries)
    return replace(data, serving=join_serving(answers, window))


def join_answers(answers: Mapping[str, list[Series]], window: FleetWindow, selector: str = "", *, url: str,
                 warnings: Sequence[str] = (), queries: Sequence[MetricQuery] = QUERIES) -> FleetData:
    """The GPUs of the answers (by metric) bucket by bucket, in gpuscope's units; PrometheusError when none has a
    utilisation series. Pure: what ``fetch_fleet`` does with what Prometheus answered."""
    by_metric = {q.metric: q for q in queries}
    relabelled = {s.labels.get("instance") for m in BUSY_METRICS for s in answers.get(m, [])
                  if "exported_pod" in s.labels}
    keys: dict[tuple[object, ...], int] = {}
    infos: list[GpuSeriesInfo] = []
    for metric in BUSY_METRICS:
        for series in answers.get(metric, []):
            key, info = _identify(series.labels, relabelled)
            if info is not None and key not in keys:
                keys[key] = len(infos)
                infos.append(info)
    if not infos:
        raise PrometheusError(_nothing_matched(url, selector, window))
    metrics = tuple(q.metric for q in queries)
    values = np.full((len(infos), len(metrics), window.buckets), np.nan)
    by_pod: dict[tuple[object, ...], int] = {k[1:]: row for k, row in keys.items() if k[2] is not None}
    for m, metric in enumerate(metrics):
        for series in answers.get(metric, []):
            key = _identify(series.labels, relabelled)[0]
            # A per-pod series may carry no host label of its own: its GPU's UUID and the pod find it.
            row = keys.get(key, by_pod.get(key[1:]) if metric == POD_SM_UTIL and key else None)
            if row is not None:
                _fill(values[row, m], series, window, by_metric[metric].field)
    return FleetData(prometheus_url=url, selector=normalize_selector(selector), window=window,
                     gpus=tuple(infos), metrics=metrics, values=values, warnings=tuple(dict.fromkeys(warnings)))


def _all_or_none(client: Prometheus, calls: dict[str, Callable[[], list[Series]]],
                 workers: int) -> dict[str, list[Series]]:
    """Every call's answer, ``workers`` at a time; at the first failure the others are cancelled (the client ends
    their requests in flight) and that failure is raised, so one bad query does not wait for the rest."""
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        done, _ = wait(futures.values(), return_when=FIRST_EXCEPTION)
        failed = next((f for f in futures.values() if f in done and f.exception() is not None), None)
        if failed is not None:
            client.cancel()
            failed.result()
        return {name: future.result() for name, future in futures.items()}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _range(client: Prometheus, query: str, first_s: float, points: int, step_s: float) -> list[Series]:
    """``points`` steps of ``query`` from ``first_s``; where the server would load too many samples at once, the
    two halves of the time range are asked for apart (and so on, down to one step), and joined."""
    try:
        return client.query_range(query, start_s=first_s, end_s=first_s + (points - 1) * step_s, step_s=step_s)
    except QueryTooLarge:
        if points < 2:
            raise
    half = points // 2
    joined: dict[tuple[tuple[str, str], ...], list[Series]] = {}
    for part in (_range(client, query, first_s, half, step_s),
                 _range(client, query, first_s + half * step_s, points - half, step_s)):
        for series in part:
            joined.setdefault(tuple(sorted(series.labels.items())), []).append(series)
    return [Series(labels=parts[0].labels, times_s=np.concatenate([p.times_s for p in parts]),
                   values=np.concatenate([p.values for p in parts])) for parts in joined.values()]


def _fill(out: np.ndarray, series: Series, window: FleetWindow, field: Field) -> None:
    """Put the series' points into their buckets, in gpuscope's units; sentinels and impossible values stay NaN.

    Plain values (finite, under DCGM's smallest sentinel, and within 0..1 for a ratio) are scaled in one step;
    anything else goes through the DCGM collector's own check, one value at a time.
    """
    if not len(series.times_s):
        return
    with np.errstate(over="ignore", invalid="ignore"):  # a time far off (1e300 s) is simply outside the window
        position = np.rint((series.times_s * 1e9 - window.start_ns) / window.step_ns) - 1
        ok = np.isfinite(position) & (position >= 0) & (position < window.buckets)
    index, raw = position[ok].astype(np.int64), series.values[ok]
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = raw * field.scale
        plain = np.isfinite(raw) & (raw >= 0) & (raw < _SENTINEL_FLOOR)
        if field.fraction:
            plain &= scaled <= 1.0
    out[index[plain]] = scaled[plain]
    for i, value in zip(index[~plain].tolist(), raw[~plain].tolist()):
        checked = field_value(value, field)
        if checked is not None:
            out[i] = checked


def _identify(raw_labels: dict[str, str], relabelled: set[str | None]) -> tuple[tuple[object, ...],
                                                                              GpuSeriesInfo | None]:
    """The GPU-and-owner key of a series and what its labels say; None for a series with no usable ``gpu`` label.

    Where Prometheus' Kubernetes discovery put the exporter's own pod in ``pod``, the workload's is ``exported_pod``;
    on such a target (``relabelled`` instances) a series without ``exported_pod`` is a GPU no workload holds.
    """
    labels = {k.lower(): v for k, v in raw_labels.items() if k != "__name__"}
    exporter_labels = raw_labels.get("instance") in relabelled
    for name in _EXPORTED:
        if labels.get(f"exported_{name}"):
            labels[name] = labels[f"exported_{name}"]
        elif exporter_labels:
            labels.pop(name, None)
    device = device_of(labels)
    if device is None:
        return (), None
    host = device.hostname or _host_of(labels.get("instance"))
    info = GpuSeriesInfo(host=host, gpu=device.gpu, uuid=device.uuid, model=device.model, pod=device.pod,
                         namespace=device.namespace, mig_profile=device.mig_profile, labels=labels)
    return (host, device.gpu, device.uuid, device.namespace, device.pod), info


def _host_of(instance: str | None) -> str | None:
    """The host of a scrape target "host:port" (IPv6 in brackets kept whole)."""
    if not instance:
        return None
    if instance.startswith("["):
        return instance.split("]", 1)[0] + "]"
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance


def _nothing_matched(url: str, selector: str, window: FleetWindow) -> str:
    where = f" matching {{{normalize_selector(selector)}}}" if normalize_selector(selector) else ""
    return (f"Prometheus at {url} has no dcgm-exporter utilisation series (DCGM_FI_DEV_GPU_UTIL or "
            f"DCGM_FI_PROF_GR_ENGINE_ACTIVE){where} in the window ({_utc(window.start_ns)} to "
            f"{_utc(window.end_ns)}); check the selector, the window, and that Prometheus scrapes dcgm-exporter")


def _utc(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ns / 1e9))
