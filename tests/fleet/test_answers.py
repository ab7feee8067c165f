"""The reader of Prometheus' answers, fuzzed: whatever the bytes, series and a fleet of GPUs in gpuscope's units,
or one ``PrometheusError`` line; never another exception, a warning on stderr, or a wait past a bound.

Inputs come from benchmarks/fuzz_http_inputs.py (the long run, benchmarks/fuzz_http_readers.py, draws 10,000 of
them) driven by Hypothesis, which shrinks a failing one, and from Hypothesis' own strategies."""

from __future__ import annotations

import json
import math
import random
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.api.errors import GpuscopeError
from gpuscope.fleet.answers import PrometheusError, parse_range
from gpuscope.fleet.query import join_answers, plan_window
from gpuscope.model.fleet import DRAM_ACTIVE, ENERGY_J, GR_ENGINE, MEMORY_USED_BYTES, POWER_W, SM_ACTIVE, UTIL
from tests.conftest import load_benchmark

fi = load_benchmark("fuzz_http_inputs")
URL = "http://prometheus:9090"
WINDOW = plan_window(*fi.WINDOW_S)
BOUND_S = 10.0
"""Far above what one answer of these sizes takes (milliseconds), far below a hang."""
SHARES = {UTIL, GR_ENGINE, SM_ACTIVE, DRAM_ACTIVE}
FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def read(raw: bytes, other: bytes | None = None) -> str:
    """What the reader makes of ``raw`` as the utilisation answer (and ``other`` as every other metric's):
    "fleet" or "error", after checking the promises either way."""
    start = time.monotonic()
    try:
        answers = {UTIL: parse_range(raw, URL).series}
        if other is not None:
            answers |= dict.fromkeys((GR_ENGINE, SM_ACTIVE, DRAM_ACTIVE, MEMORY_USED_BYTES, POWER_W, ENERGY_J),
                                     parse_range(other, URL).series)
        data = join_answers(answers, WINDOW, url=URL)
    except PrometheusError as exc:
        message = str(exc)
        assert isinstance(exc, GpuscopeError) and message and "\n" not in message
        assert message.isprintable(), repr(message)
        return "error"
    finally:
        assert time.monotonic() - start < BOUND_S
    assert data.values.shape == (len(data.gpus), len(data.metrics), WINDOW.buckets)
    for m, metric in enumerate(data.metrics):
        known = data.values[:, m][~np.isnan(data.values[:, m])]
        assert np.isfinite(known).all() and (known >= 0).all(), metric
        assert (known < 0x7FFFFFF0 * 2**20).all(), f"{metric}: a DCGM sentinel read as a value"
        if metric in SHARES:
            assert (known <= 1).all(), metric
    assert len({(g.host, g.gpu, g.uuid, g.namespace, g.pod) for g in data.gpus}) == len(data.gpus)
    return "fleet"


@pytest.mark.filterwarnings("error")
@FUZZ
@given(st.randoms(use_true_random=False))
def test_generated_and_mutated_answers(rng: random.Random) -> None:
    read(fi.prometheus_answer(rng), fi.prometheus_answer(rng) if rng.random() < 0.5 else None)


@pytest.mark.filterwarnings("error")
@FUZZ
@given(st.binary(max_size=4096))
def test_any_bytes(raw: bytes) -> None:
    read(raw)


JSON = st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)
POINT = st.one_of(st.tuples(st.floats(allow_nan=False) | st.integers(), st.sampled_from(fi.VALID_VALUES + fi.NUMBERS)),
                  st.lists(JSON, max_size=3))
SERIES = st.fixed_dictionaries({"metric": st.dictionaries(st.sampled_from(fi.LABELS), st.text(max_size=12), max_size=6)
                                | JSON, "values": st.lists(POINT, max_size=12) | JSON})
ANSWER = st.fixed_dictionaries(
    {"status": st.sampled_from(["success", "error", "partial"]) | JSON,
     "data": st.fixed_dictionaries({"resultType": st.sampled_from(["matrix", "vector", "scalar"]) | JSON,
                                    "result": st.lists(SERIES, max_size=5) | JSON}) | JSON},
    optional={"warnings": st.lists(st.text(max_size=20), max_size=2) | JSON, "errorType": JSON, "error": JSON})


@pytest.mark.filterwarnings("error")
@FUZZ
@given(ANSWER)
def test_documents_of_every_shape(answer: dict[str, Any]) -> None:
    read(json.dumps(answer).encode())  # NaN and Infinity written as Python writes them: not JSON either


# -- what the fuzzing found, kept -------------------------------------------------------------------------


def answer_with(values: str) -> bytes:
    return (b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"gpu":"0","Hostname":"n1"},'
            b'"values":' + values.encode() + b"}]}}")


@pytest.mark.parametrize("values", [
    '[[1060,"fifty"]]', '[[1060,"1_000"]]', '[[1060,"0x10"]]', '[[1060,"--1"]]', '[[1060,""]]', '[[1060," 5"]]',
    '[[1060]]', '[[1060],[1120,"3","4"]]', '[[1060,"1","2"]]', '[["1060","1"]]', '[[1060,1]]', '[1060,"1"]',
    '[[1e999,"1"]]', '[[NaN,"1"]]', '{"1060":"1"}', '[[1060,"1"],]', '[' * 5000 + ']' * 5000,
])
def test_malformed_points_are_one_error(values: str) -> None:
    """np.fromstring raised ValueError out of the reader on numpy 2 for some of these; others were read as other
    pairs than the server wrote; nesting past msgspec's depth limit raised RecursionError."""
    with pytest.raises(PrometheusError, match="malformed points|not with the Prometheus API's JSON"):
        parse_range(answer_with(values), URL)


def test_deep_nesting_anywhere_is_one_error() -> None:
    with pytest.raises(PrometheusError, match="not with the Prometheus API's JSON"):
        parse_range(b'{"status":"success","extra":' + b"[" * 100_000 + b"]" * 100_000 + b"}", URL)


@pytest.mark.filterwarnings("error")
def test_points_far_outside_the_window_are_left_out_without_a_warning() -> None:
    values = '[[1060,"50"],[1e300,"50"],[-1e300,"50"],[9.3e18,"50"],[1120,"NaN"],[1180,"+Inf"],[1240,"-Inf"]]'
    data = join_answers({UTIL: parse_range(answer_with(values), URL).series}, WINDOW, url=URL)
    util = data.metric(UTIL)[0]
    assert util[0] == 0.5 and np.isnan(util[1:]).all()


def test_values_as_prometheus_writes_them() -> None:
    values = ('[[1060,"50"],[1120,"1e+02"],[1180,"9223372036854775794"],[1240,"2147483647"],[1300,"-1"],'
              '[1360,"0.5"],[1420,"-0"]]')
    series = parse_range(answer_with(values), URL).series[0]
    np.testing.assert_array_equal(series.times_s, [1060, 1120, 1180, 1240, 1300, 1360, 1420])
    assert series.values.tolist()[:2] == [50.0, 100.0] and series.values[2] == 9223372036854775794.0
    util = join_answers({UTIL: [series]}, WINDOW, url=URL).metric(UTIL)[0]
    expected = [0.5, 1.0, math.nan, math.nan, math.nan, 0.005, 0.0, math.nan, math.nan, math.nan]
    np.testing.assert_array_equal(util, expected)  # sentinels, int32 blanks and negatives are gaps, -0 is 0
    spaced = answer_with('[ [ 1060 , "50" ] ,\n [1120,"NaN"] ]')
    np.testing.assert_array_equal(parse_range(spaced, URL).series[0].times_s, [1060, 1120])


def test_error_answers_and_warnings_become_printable_lines() -> None:
    with pytest.raises(PrometheusError) as caught:
        parse_range(b'{"status":"error","errorType":"bad_data\\u001b[2J","error":"parse error\\n\\u202eat 1"}', URL)
    assert str(caught.value) == "Prometheus at http://prometheus:9090: bad_data [2J: parse error  at 1"
    warned = parse_range(b'{"status":"success","warnings":["partial\\u001b]0;x\\u0007 data"],'
                         b'"data":{"resultType":"matrix","result":[]}}', URL)
    assert warned.warnings == ("partial ]0;x  data",)


def test_an_answer_of_more_series_than_a_fleet_has_is_refused_before_decoding() -> None:
    """128 MiB of series without points would decode to about a gigabyte of Python objects; the count comes first."""
    from gpuscope.fleet.answers import MAX_SERIES

    def answer(n: int) -> bytes:
        one = b'{"metric":{"gpu":"0","Hostname":"n1"},"values":[]}'
        return b'{"status":"success","data":{"resultType":"matrix","result":[' + b",".join([one] * n) + b"]}}"

    assert len(parse_range(answer(MAX_SERIES), URL).series) == MAX_SERIES
    with pytest.raises(PrometheusError, match=f"answered more than {MAX_SERIES:,} series to one query"):
        parse_range(answer(MAX_SERIES + 1), URL)


def test_an_error_type_of_invisible_characters_is_one_printable_line() -> None:
    """Found by the generator: an error type of one soft hyphen was shown raw (not a control, but not printable)."""
    with pytest.raises(PrometheusError) as caught:
        parse_range(b'{"status":"error","errorType":"\\u00ad","error":"0\\u200b1"}', URL)
    assert str(caught.value) == f"Prometheus at {URL}: error: 0 1"
