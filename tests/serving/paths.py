"""The same raw scrapes of a server through gpuscope's two paths, so their answers can be compared: live (each
scrape's text parsed by the collector, its rows analysed as a recorded run's) and fleet (what Prometheus answers of
the same samples to the fleet's queries: each series' last and highest reading in each step, ``last_over_time`` and
``max_over_time`` over ``(T - step, T]``, then joined and analysed as a fleet run's)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuscope.analyzers.serving.metrics import from_samples
from gpuscope.collectors.serving import parse_serving
from gpuscope.fleet.prometheus import Series
from gpuscope.fleet.serving import ENGINE_LABEL, PEAK, join_serving, serving_pods
from gpuscope.model import schema as S
from gpuscope.model.fleet import FleetData, FleetWindow
from gpuscope.model.serving import ServingMetrics

OUTPUT = "vllm:generation_tokens_total"
POD = {"pod": "vllm-0", "namespace": "serving", ENGINE_LABEL: "vllm"}


@dataclass(frozen=True)
class Scrape:
    """One scrape of the server at ``t_s``: each series' (by its ``engine`` label) output-token counter, None where
    that series is not in the answer; ``missed``: the scrape failed (no answer at all)."""

    t_s: float
    counters: dict[str, float | None]
    missed: bool = False

    def text(self) -> str:
        return "".join(f'{OUTPUT}{{engine="{e}",model_name="m"}} {_number(v)}\n'
                       for e, v in self.counters.items() if v is not None)


def _number(value: float) -> str:
    return "NaN" if math.isnan(value) else "+Inf" if value == math.inf else repr(float(value))


def live(scrapes: list[Scrape]) -> ServingMetrics | None:
    """The metrics a live run recording these scrapes reports."""
    rows = [row for s in scrapes if not s.missed for row in parse_serving(s.text(), round(s.t_s * 1e9)).rows]
    frame = pd.DataFrame(rows, columns=list(S.SAMPLE_COLUMNS)) if rows else None
    return from_samples(frame, "vllm")


def fleet(scrapes: list[Scrape], window: FleetWindow) -> ServingMetrics:
    """The metrics ``gpuscope fleet`` reports of the pod over ``window`` when Prometheus stored these scrapes."""
    step_s, start_s = window.step_ns / 1e9, window.start_ns / 1e9
    engines = sorted({e for s in scrapes for e in s.counters})
    last: list[Series] = []
    peak: list[Series] = []
    for engine in engines:
        times, lasts, peaks = [], [], []
        for i in range(window.buckets + 1):
            end_s = start_s + i * step_s
            inside = [s.counters[engine] for s in scrapes if not s.missed and end_s - step_s < s.t_s <= end_s
                      and s.counters.get(engine) is not None]
            if inside:
                times.append(end_s)
                lasts.append(inside[-1])
                finite = [v for v in inside if v is not None and not math.isnan(v)]
                peaks.append(max(finite) if finite else math.nan)
        labels = {**POD, "engine": engine}
        last.append(Series(labels={**labels, "__name__": OUTPUT}, times_s=np.array(times), values=np.array(lasts)))
        peak.append(Series(labels=labels, times_s=np.array(times), values=np.array(peaks)))
    answers = {f"serving:{S.SERVING_OUTPUT_TOKENS}": last, f"serving:{S.SERVING_OUTPUT_TOKENS}{PEAK}": peak}
    data = FleetData(prometheus_url="http://prometheus.invalid", selector="", window=window, gpus=(), metrics=(),
                     values=np.empty((0, 0, window.buckets)), serving=join_serving(answers, window))
    (pod,) = serving_pods(data, [], np.empty((0, window.buckets)))
    return pod.metrics


def by_hand(scrapes: list[Scrape]) -> float:
    """Output tokens a second by the obvious rule, from the raw samples: per series, every rise from the last
    readable sample, a fall counting the new value whole (the process restarted from 0); NaN, infinite and
    negative samples passed over; the sum over series, over the seconds from the first answered scrape to the
    last."""
    answered = [s for s in scrapes if not s.missed]
    total = 0.0
    for engine in sorted({e for s in answered for e in s.counters}):
        previous = None
        for s in answered:
            value = s.counters.get(engine)
            if value is None or math.isnan(value) or math.isinf(value) or value < 0:
                continue
            if previous is not None:
                total += value - previous if value >= previous else value
            previous = value
    return total / (answered[-1].t_s - answered[0].t_s)
