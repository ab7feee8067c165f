"""Serving counters and histograms as the live scrape and the fleet read them, on values known by construction: each
series' increase before the sum (a restart counted from 0, a gap a longer interval), the same answer from both
paths, a histogram no server means refused with its reason, and a scrape's parse bounded."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from rich.table import Table

from gpuscope.analyzers.serving.counters import increase, rises, total_increase
from gpuscope.analyzers.serving.histograms import read_histogram
from gpuscope.analyzers.serving.metrics import from_samples
from gpuscope.collectors import serving as C
from gpuscope.collectors.serving import ServingSampler, parse_serving
from gpuscope.fleet.serving import MAX_POD_WARNINGS, serving_pods, serving_warnings
from gpuscope.fleet.serving_view import MAX_PODS, serving_table
from gpuscope.model import schema as S
from gpuscope.model.fleet import FleetData, FleetWindow
from gpuscope.model.redact import about, redact_text
from gpuscope.model.serving import (
    FleetServingData,
    PodHistogram,
    ServingMetrics,
    ServingPod,
    ServingSeriesInfo,
)
from gpuscope.net.deadline import Deadline
from tests.serving.paths import Scrape, by_hand, fleet, live

START_S = 1_800_000_000.0


def two_engines(*, restart_s: float, miss_s: float | None = None, seconds: int = 20) -> list[Scrape]:
    """Two engines of 500 tokens a second that have counted for 800 s; engine 1 restarts at ``restart_s`` (between
    scrapes); the scrape at ``miss_s`` fails."""
    out = []
    for t in range(seconds + 1):
        one = 500.0 * (t - restart_s) if t >= restart_s else 500.0 * (800 + t)
        out.append(Scrape(t_s=START_S + t, counters={"0": 500.0 * (800 + t), "1": one}, missed=t == miss_s))
    return out


def test_a_restart_counts_from_zero_and_a_reading_that_is_none_only_lengthens_the_interval() -> None:
    assert increase(np.array([100.0, 150.0, 20.0, 50.0])) == 50 + 20 + 30
    assert increase(np.array([100.0, math.nan, -5.0, math.inf, 300.0])) == 200, "passed over, not a restart"
    assert increase(np.array([5.0])) is None and increase(np.array([math.nan, math.nan])) is None
    assert total_increase([np.array([math.nan]), np.array([1.0, 3.0])]) == 2
    assert total_increase([np.array([math.nan])]) is None


def test_engines_are_added_up_after_each_ones_increase_not_before() -> None:
    """The sum of two engines' counters falls when one restarts; read as a restart of the sum, the other engine's
    whole total counts again (400,000 tokens in a 20 s window). Each engine's own increase gives 1,000 a second."""
    scrapes = two_engines(restart_s=4.5, miss_s=9)
    summed = np.array([sum(v for v in s.counters.values() if v is not None) for s in scrapes if not s.missed])
    assert (increase(summed) or 0) / 20 > 20_000, "the class of mistake this guards against"
    m = live(scrapes)
    assert m is not None and m.window_s == 20
    # the 0.5 s engine 1 ran between its last reading and its restart is seen by nobody: 250 tokens of 20,000
    assert m.output_tokens_per_s == pytest.approx(1000 - 250 / 20)
    assert m.output_tokens_per_s == pytest.approx(by_hand(scrapes))


def test_live_and_fleet_agree_on_the_same_server() -> None:
    scrapes = two_engines(restart_s=7.5, miss_s=12)
    window = FleetWindow(start_ns=round(START_S * 1e9), step_ns=5 * 10**9, buckets=4)
    live_m, fleet_m = live(scrapes), fleet(scrapes, window)
    assert live_m is not None and fleet_m.window_s == live_m.window_s == 20
    assert fleet_m.output_tokens == pytest.approx(live_m.output_tokens, rel=1e-12)
    assert fleet_m.output_tokens_per_s == pytest.approx(live_m.output_tokens_per_s, rel=1e-12)


def test_a_restart_inside_a_step_is_seen_by_the_steps_peak_even_when_the_counter_climbs_back() -> None:
    """Readings at step ends 1000, 1000, 2000 and the second step's highest 1500: the process reached 1500,
    restarted, and counted 1000 again by the step's end (the last reading alone shows no fall)."""
    assert list(rises(np.array([1000.0, 1000.0, 2000.0]), np.array([1000.0, 1500.0, 2000.0]))[1:]) == [1500, 1000]
    assert list(rises(np.array([1000.0, 300.0]), np.array([1000.0, 1200.0]))[1:]) == [200 + 300]


def test_what_the_fleet_cannot_see_is_bounded_by_one_step_of_the_restarting_engine() -> None:
    """An engine restarted under a step after it started (at 4.5 s, from 0), its scrape at 5 s missed, climbs back
    past its 4 s reading before the next step ends: no reading of that step shows the restart. The fleet misses at
    most the tokens of one step (5 s x 500); the live scrape, which reads every sample, misses nothing."""
    scrapes = [Scrape(t_s=START_S + t, counters={"0": 500.0 * (t if t < 4.5 else t - 4.5)}, missed=t == 5)
               for t in range(21)]
    window = FleetWindow(start_ns=round(START_S * 1e9), step_ns=5 * 10**9, buckets=4)
    live_m, fleet_m = live(scrapes), fleet(scrapes, window)
    assert live_m is not None and live_m.output_tokens == pytest.approx(by_hand(scrapes) * 20)
    assert fleet_m.output_tokens is not None and live_m.output_tokens is not None
    assert 0 < live_m.output_tokens - fleet_m.output_tokens <= 5 * 500


def test_counters_no_server_means_are_na_never_0_on_both_paths() -> None:
    scrapes = [Scrape(t_s=START_S + t, counters={"0": math.nan, "1": -3.0}) for t in range(11)]
    window = FleetWindow(start_ns=round(START_S * 1e9), step_ns=5 * 10**9, buckets=2)
    live_m, fleet_m = live(scrapes), fleet(scrapes, window)
    assert live_m is None, "no row was recorded: the server's metrics are unknown"
    assert fleet_m.output_tokens_per_s is None and fleet_m.output_tokens is None
    assert fleet_m.warnings == ("vllm:generation_tokens_total: 2 series with values that are not a count (NaN, "
                                "infinite or negative), passed over",)
    skipped = parse_serving(scrapes[0].text(), 0).skipped
    assert sum(skipped.values()) == 2 and parse_serving(scrapes[0].text(), 0).rows == []


BUCKETS = {"0.1": 4.0, "0.25": 8.0, "0.5": 9.0, "1": 10.0, "+Inf": 10.0}


@pytest.mark.parametrize(("buckets", "sum_s", "count", "why"), [
    ({**BUCKETS, "-1": 2.0}, 3.0, 10.0, 'bound le="-1" is below 0'),
    ({"0.1": 9.0, "0.5": 7.0, "+Inf": 10.0}, 3.0, 10.0, "not cumulative: le=0.5 counts 7"),
    ({**BUCKETS, "abc": 5.0}, 3.0, 10.0, 'bound le="abc" is not a number'),
    ({"0.1": 4.0, "1": 10.0}, 3.0, 10.0, "no le=\"+Inf\" bucket"),
    ({**BUCKETS, "0.10": 4.0}, 3.0, 10.0, "two buckets have the bound 0.10"),
    ({**BUCKETS, "0.5": math.nan}, 3.0, 10.0, 'bucket le="0.5" could not be read'),
    (BUCKETS, 3.0, 0.0, "_count (0) disagrees with its +Inf bucket (10 observations)"),
])
def test_a_broken_histogram_has_no_figures_and_says_why(buckets: dict[str, float], sum_s: float, count: float,
                                                        why: str) -> None:
    figures, problem = read_histogram(buckets, sum_s, count)
    assert figures is None and problem is not None and why in problem


@pytest.mark.parametrize(("sum_s", "why"), [(-2.0, "_sum fell by 2 s"), (1e8, "past its largest bound (1 s)")])
def test_a_sum_no_latency_can_have_leaves_only_the_mean_unknown(sum_s: float, why: str) -> None:
    figures, problem = read_histogram(BUCKETS, sum_s, 10.0)
    assert figures is not None and figures.mean_s is None and problem is not None and why in problem
    assert figures.p50_s == pytest.approx(0.1 + 0.15 * (5 - 4) / (8 - 4)) and figures.observations == 10


def test_a_sound_histogram_reads_as_before_and_a_count_a_moment_apart_is_tolerated() -> None:
    figures, problem = read_histogram(BUCKETS, 3.0, 10.4)
    assert problem is None and figures is not None and figures.mean_s == pytest.approx(0.3)
    assert read_histogram({"0.1": 0.0, "+Inf": 0.0}, 0.0, 0.0) == (None, None), "nothing observed: no figures"


def _ttft(le: str, per_s: float, label: str) -> list[str]:
    return [f'vllm:time_to_first_token_seconds_bucket{{le="{le}",{label}}} {per_s}']


def scrape_rows(texts: list[str]) -> pd.DataFrame:
    rows = [r for i, text in enumerate(texts) for r in parse_serving(text, i * 10**9).rows]
    return pd.DataFrame(rows, columns=list(S.SAMPLE_COLUMNS))


def test_a_live_ttft_from_a_broken_histogram_is_na_never_negative() -> None:
    """A bucket at -1 s and buckets out of order (the scrape records them; the reading refuses them), and in the
    end-to-end histogram a bound "abc" (the scrape leaves that series out and counts it)."""
    def text(n: int) -> str:
        label = 'engine="0"'
        lines = ["vllm:generation_tokens_total 100", *_ttft("-1", 5 * n, label), *_ttft("0.1", 9 * n, label),
                 *_ttft("0.5", 7 * n, label), *_ttft("+Inf", 10 * n, label),
                 f"vllm:time_to_first_token_seconds_sum{{{label}}} {2 * n}",
                 f'vllm:e2e_request_latency_seconds_bucket{{le="abc",{label}}} {n}',
                 f'vllm:e2e_request_latency_seconds_bucket{{le="+Inf",{label}}} {2 * n}']
        return "\n".join(lines) + "\n"

    m = from_samples(scrape_rows([text(n) for n in range(1, 5)]), "vllm")
    assert m is not None and m.ttft is None and m.e2e_latency is None
    (warning,) = m.warnings
    assert warning.startswith("vllm:time_to_first_token_seconds: a bucket's bound le=\"-1.0\" is below 0")
    skipped = parse_serving(text(1), 0).skipped
    assert skipped == {("vllm:e2e_request_latency_seconds",
                        'a series with a bucket whose bound le="abc" is not a number'): 1}


def test_a_figure_with_too_many_series_or_a_series_with_too_many_buckets_is_left_out_and_counted() -> None:
    many = "".join(f'vllm:generation_tokens_total{{engine="{i}"}} {i}\n' for i in range(C.MAX_SERIES + 1))
    buckets = "".join(f'vllm:e2e_request_latency_seconds_bucket{{le="{i}"}} {i}\n' for i in range(C.MAX_BUCKETS + 1))
    scrape = parse_serving(many + buckets + 'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 99\n'
                           "vllm:prompt_tokens_total 7\n", 0)
    assert [S.serving_row_parts(r[4])[0] for r in scrape.rows] == [S.SERVING_PROMPT_TOKENS]
    assert {name for name, _ in scrape.skipped} == {"vllm:generation_tokens_total",
                                                    "vllm:e2e_request_latency_seconds"}


def test_a_scrape_past_every_figures_cap_together_is_a_gap_and_the_scan_stops() -> None:
    text = "vllm:num_requests_running 1\n" * (C.MAX_LINES + 1) + "vllm:generation_tokens_total 5\n"
    with pytest.raises(C.ServingScrapeError, match="more than 6,496 lines of serving metrics in one scrape"):
        parse_serving(text, 0)


def test_a_scrape_whose_time_ran_out_leaves_its_unread_figures_out_and_says_so() -> None:
    done = Deadline(0)
    scrape = parse_serving("vllm:generation_tokens_total 5\nvllm:num_requests_running 2\n", 0, done)
    assert scrape.rows == [] and scrape.cut == (S.SERVING_OUTPUT_TOKENS, S.SERVING_REQUESTS_RUNNING)


def test_only_the_lines_of_the_metrics_read_are_parsed_out_of_a_large_scrape() -> None:
    other = "".join(f'other_metric_total{{id="{i}"}} {i}\n' for i in range(50_000))
    text = other + 'vllm:generation_tokens_total{engine="0"} 12\n' + other + "vllm:num_requests_running 3\n"
    scrape = parse_serving(text, 0)
    assert sorted((S.serving_row_parts(r[4])[0], r[5]) for r in scrape.rows) == [
        (S.SERVING_OUTPUT_TOKENS, 12), (S.SERVING_REQUESTS_RUNNING, 3)]
    assert not scrape.skipped


def test_the_samplers_warnings_name_the_endpoint_and_metric_apart_from_the_masked_url() -> None:
    sampler = ServingSampler("http://127.0.0.1:9/metrics?token=sekrit-123")
    sampler.gaps, sampler.last_error = 1, "no answer within 0.5 s"
    sampler.skipped[("vllm:time_to_first_token_seconds", "a series with a bucket bound given twice")] = 3
    gap, skipped = (redact_text(w) for w in sampler.warnings())
    assert gap.startswith("serving metrics at http://127.0.0.1:9/metrics?token=***: 1 scrape gave nothing (the last: "
                          "no answer within 0.5 s)")
    assert skipped == ("serving metrics at http://127.0.0.1:9/metrics?token=***: vllm:time_to_first_token_seconds: "
                       "skipped 3 times, a series with a bucket bound given twice; the rest is reported (check what "
                       "the server exports there)")
    assert redact_text(about("http://h/m?token=abc", "no answer")) == "http://h/m?token=***: no answer"


def _pod(i: int, warnings: tuple[str, ...] = ()) -> ServingPod:
    metrics = ServingMetrics(engine="vllm", window_s=60.0, output_tokens_per_s=float(i), prompt_tokens_per_s=None,
                             warnings=warnings)
    return ServingPod(name=f"ns/pod-{i:02d}", namespace="ns", pod=f"pod-{i:02d}", gpus=0, gpu_hours=0.0,
                      cost_usd=None, metrics=metrics)


def test_the_fleets_serving_views_are_bounded_and_say_what_they_left_out() -> None:
    pods = tuple(_pod(i, ("vllm:generation_tokens_total: 1 series with values that are not a count, passed over",)
                      if i < 13 else ()) for i in range(25))
    lines = serving_warnings(pods)
    assert len(lines) == MAX_POD_WARNINGS + 1 and lines[0].startswith("serving pod ns/pod-00: vllm:generation_")
    assert lines[-1].startswith("3 more serving pods have series that could not be read")
    table = serving_table(pods)
    assert isinstance(table, Table) and table.row_count == MAX_PODS and table.caption == "5 more pods in --json"


def test_a_fleet_run_saved_before_reads_as_it_did() -> None:
    """Saved serving data without the seconds its series span, nor histogram counts: tokens over the buckets that
    have an increase, percentiles from the buckets alone."""
    window = FleetWindow(start_ns=0, step_ns=10 * 10**9, buckets=3)
    old = FleetServingData(
        pods=(ServingSeriesInfo(namespace=None, pod="p", engine="vllm"),),
        metrics=(S.SERVING_OUTPUT_TOKENS,), values=np.array([[[5000.0, np.nan, 5000.0]]]),
        histograms=(PodHistogram(pod=0, histogram=S.SERVING_HISTOGRAMS[0], bounds=("0.1", "+Inf"),
                                 counts=(5.0, 10.0), sum_s=1.0),))
    data = FleetData(prometheus_url="http://p.invalid", selector="", window=window, gpus=(), metrics=(),
                     values=np.empty((0, 0, 3)), serving=old)
    (pod,) = serving_pods(data, [], np.empty((0, 3)))
    assert pod.metrics.window_s == 20 and pod.metrics.output_tokens_per_s == 500
    assert pod.metrics.ttft is not None and pod.metrics.ttft.p50_s == pytest.approx(0.1)
