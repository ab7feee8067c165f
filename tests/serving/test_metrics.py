"""The serving figures' arithmetic on values known by construction: each engine's names read into one set,
histogram percentiles as Prometheus' histogram_quantile takes them, counter increases across a restart, and what a
million tokens cost."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gpuscope.analyzers.serving.counters import increase
from gpuscope.analyzers.serving.histograms import quantile
from gpuscope.analyzers.serving.metrics import from_samples, priced
from gpuscope.collectors.serving import ServingScrapeError, parse_serving
from gpuscope.model import schema as S

VLLM = """# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1000.0
vllm:generation_tokens_total{engine="1",model_name="m"} 500.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 4000.0
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.4
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.9
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 1.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.7
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 4.0
"""
SGLANG = """sglang:generation_tokens_total{model_name="m"} 7.557572e+06
sglang:prompt_tokens_total{model_name="m"} 8.128902e+06
sglang:num_running_reqs{model_name="m"} 12
sglang:num_queue_reqs{model_name="m"} 5
sglang:token_usage{model_name="m"} 0.28
"""
TGI = """tgi_request_generated_tokens_sum 4200
tgi_request_generated_tokens_count 42
tgi_request_input_length_sum 9000
tgi_batch_current_size 7
tgi_queue_size 2
tgi_request_mean_time_per_token_duration_bucket{le="0.05"} 30
tgi_request_mean_time_per_token_duration_bucket{le="+Inf"} 42
"""


def series(text: str) -> dict[str, list[float]]:
    """Each row's value by its figure, the series (engines, models) of one figure in a list."""
    found = parse_serving(text, 7).rows
    assert all(r[:4] == (7, S.SERVING, S.NO_GPU, S.NO_PID) for r in found)
    assert all(S.known_metric(r[4]) for r in found), "the store takes every row"
    out: dict[str, list[float]] = {}
    for r in found:
        out.setdefault(S.serving_row_parts(r[4])[0], []).append(r[5])
    return out


def rows(text: str) -> dict[str, float]:
    """Each figure's value, for a scrape with one series of each."""
    got = series(text)
    assert all(len(v) == 1 for v in got.values())
    return {name: v[0] for name, v in got.items()}


def test_vllm_counters_are_kept_series_by_series_and_gauges_added_up() -> None:
    got = series(VLLM)
    assert parse_serving(VLLM, 0).engine == "vllm"
    assert sorted(got[S.SERVING_OUTPUT_TOKENS]) == [500, 1000], "each engine's counter is its own series"
    assert got[S.SERVING_PROMPT_TOKENS] == [4000]
    assert got[S.SERVING_REQUESTS_RUNNING] == [5] and got[S.SERVING_REQUESTS_WAITING] == [1]
    assert got[S.SERVING_KV_CACHE_USAGE] == [pytest.approx(0.3)], "the newer name first, the older one ignored"
    assert sorted(got["serving.ttft_s.le=0.1"]) == [1, 3] and sorted(got["serving.ttft_s.le=+Inf"]) == [1, 4]
    assert got["serving.ttft_s.sum"] == [0.7] and got["serving.ttft_s.count"] == [4]
    keys = {S.serving_row_parts(r[4])[1] for r in parse_serving(VLLM, 0).rows if r[4].startswith("serving.ttft")}
    assert len(keys) == 2, "a histogram's buckets, sum and count share their series' name"


def test_sglang_and_tgi_speak_their_own_names() -> None:
    sglang, tgi = rows(SGLANG), rows(TGI)
    assert parse_serving(SGLANG, 0).engine == "sglang" and parse_serving(TGI, 0).engine == "tgi"
    assert sglang == {S.SERVING_OUTPUT_TOKENS: 7557572, S.SERVING_PROMPT_TOKENS: 8128902,
                      S.SERVING_REQUESTS_RUNNING: 12, S.SERVING_REQUESTS_WAITING: 5, S.SERVING_KV_CACHE_USAGE: 0.28}
    assert tgi[S.SERVING_OUTPUT_TOKENS] == 4200 and tgi[S.SERVING_PROMPT_TOKENS] == 9000
    assert (tgi[S.SERVING_REQUESTS_RUNNING], tgi[S.SERVING_REQUESTS_WAITING]) == (7, 2)
    assert S.SERVING_KV_CACHE_USAGE not in tgi, "TGI exports no KV-cache use: no row, never 0"
    assert tgi["serving.itl_s.le=0.05"] == 30 and tgi["serving.itl_s.le=+Inf"] == 42


def test_text_that_is_not_prometheus_is_an_error_and_other_metrics_are_no_rows() -> None:
    with pytest.raises(ServingScrapeError):
        parse_serving("<html><body>hello</body></html>", 0)
    scrape = parse_serving("process_cpu_seconds_total 3\n", 0)
    assert (scrape.rows, scrape.engine) == ([], None)


def test_a_count_past_any_float_is_no_row_and_no_crash() -> None:
    """An integer written with more digits than a float holds (the parser keeps it an int) is left out, as an
    infinite value is; the others are read."""
    text = f"vllm:generation_tokens_total {10**400}\nvllm:prompt_tokens_total 40\nvllm:num_requests_running 2\n"
    scrape = parse_serving(text, 0)
    got = {S.serving_row_parts(name)[0]: value for _, _, _, _, name, value in scrape.rows}
    assert S.SERVING_OUTPUT_TOKENS not in got and got[S.SERVING_PROMPT_TOKENS] == 40
    assert sum(scrape.skipped.values()) == 1, "the value left out is counted"


@pytest.mark.parametrize("q, expected", [
    (0.5, 0.1 + 0.15 * (5 - 4) / (8 - 4)),  # rank 5 of 10 inside (0.1, 0.25]
    (0.8, 0.25),  # rank 8 is the top of (0.1, 0.25]
    (0.95, 0.5 + 0.5 * (9.5 - 9) / (10 - 9)),  # rank 9.5 inside (0.5, 1]
    (1.0, 1.0),
])
def test_percentiles_interpolate_inside_the_bucket_as_histogram_quantile_does(q: float, expected: float) -> None:
    buckets = {0.1: 4.0, 0.25: 8.0, 0.5: 9.0, 1.0: 10.0, math.inf: 10.0}
    assert quantile(q, buckets) == pytest.approx(expected)


def test_percentile_edge_cases() -> None:
    assert quantile(0.99, {0.1: 1.0, math.inf: 10.0}) == 0.1, "past the last finite bound: that bound"
    assert quantile(0.5, {0.1: 0.0, math.inf: 0.0}) is None, "nothing observed"
    assert quantile(0.5, {0.1: 3.0, 0.5: 4.0}) is None, "without +Inf the total is unknown"
    assert quantile(0.5, {0.0: 5.0, 1.0: 10.0, math.inf: 10.0}) == 0.0, "a bucket at 0 holds what is 0"


def test_a_counter_restart_counts_from_zero() -> None:
    assert increase(np.array([100.0, 150.0, 20.0, 50.0])) == 50 + 20 + 30
    assert increase(np.array([5.0])) is None


def test_the_live_rates_and_the_price_of_a_million_tokens() -> None:
    t = [0, 10**9, 2 * 10**9, 3 * 10**9]
    frame = pd.DataFrame(
        [(ts, S.SERVING, S.NO_GPU, S.NO_PID, S.SERVING_OUTPUT_TOKENS, 2000.0 * i) for i, ts in enumerate(t)]
        + [(ts, S.SERVING, S.NO_GPU, S.NO_PID, S.SERVING_PROMPT_TOKENS, 6000.0 * i) for i, ts in enumerate(t)]
        + [(ts, S.SERVING, S.NO_GPU, S.NO_PID, S.SERVING_REQUESTS_WAITING, float(i)) for i, ts in enumerate(t)],
        columns=list(S.SAMPLE_COLUMNS))
    m = from_samples(frame, "vllm")
    assert m is not None and m.window_s == 3 and m.output_tokens == 6000 and m.output_tokens_per_s == 2000
    assert (m.requests_waiting, m.requests_waiting_max) == (1.5, 3)
    assert m.kv_cache_usage is None and m.ttft is None
    p = priced(m, usd_per_hour=7.2, watts=500.0, gpu_busy=0.5)
    assert p.usd_per_million_output_tokens == pytest.approx(7.2 / 3600 / 2000 * 1e6)  # $1.00
    assert p.usd_per_million_prompt_tokens == pytest.approx(7.2 / 3600 / 6000 * 1e6)
    assert p.usd_per_million_tokens == pytest.approx(7.2 / 3600 / 8000 * 1e6)
    assert p.joules_per_output_token == pytest.approx(500 / 2000)
    unpriced = priced(m, usd_per_hour=None, watts=None, gpu_busy=None)
    assert unpriced.usd_per_million_output_tokens is None and unpriced.joules_per_output_token is None
