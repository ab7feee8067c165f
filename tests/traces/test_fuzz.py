"""Property: any trace file (valid but odd, or broken) reads as a trace or fails with one TraceError line, within a
time bound; read whole or in chunks, the same events; analysed, shares stay fractions.

Hypothesis draws the inputs: events with fields of every JSON type, numbers past every range, and (through
``st.randoms()``) the byte- and JSON-level mutations of bundled traces that benchmarks/fuzz_readers.py runs ten
thousand times, so a failure here shrinks to a small input.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.model.trace import RankTrace
from gpuscope.traces import TraceError, read_trace
from tests.conftest import load_benchmark
from tests.traces.conftest import force_stretches
from tests.traces.same import assert_same

fi = load_benchmark("fuzz_inputs")
BOUND_S = 30
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                             HealthCheck.function_scoped_fixture])


class Hang(Exception):
    pass


@contextmanager
def time_bound(seconds: int) -> Iterator[None]:
    """Interrupt the body past ``seconds`` (a blocked open or read too: the handler's exception ends the retry)."""
    def expire(_sig: int, _frame: object) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def read_or_line(path: Path) -> RankTrace | str:
    """The trace, or the one line of its TraceError; anything else (or a hang) fails the test."""
    with time_bound(BOUND_S):
        try:
            return read_trace(path)
        except TraceError as exc:
            line = str(exc)
            assert line and "\n" not in line and "Error:" not in line, line  # no internal exception names
            return line


def assert_sane(trace: RankTrace) -> None:
    ev = trace.events
    assert ev.ts_ns.dtype == np.int64 and ev.dur_ns.dtype == np.int64
    assert (ev.dur_ns >= 0).all() and (np.diff(ev.ts_ns) >= 0).all()
    assert (ev.ts_ns.astype(np.float64) + ev.dur_ns < 2.0**63).all(), "an end past int64"
    assert ev.name_id.max(initial=-1) < len(trace.names)
    rank = analyze_rank(trace)
    for share in (rank.gpu_busy, rank.communication.overlap if rank.communication else None):
        assert share is None or (math.isfinite(share) and 0.0 <= share <= 1.0), share


# -- structured odd events --------------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
numberish = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False,
                                                                                  allow_infinity=False),
                      st.from_regex(r"\A[-+]?[0-9]{0,25}(\.[0-9]{0,5})?(e[-+]?[0-9]{1,3})?\Z"))
CATS = ("kernel", "gpu_memcpy", "cpu_op", "cuda_runtime", "user_annotation", "Kernel", "python_function", "ac2g")
ARG_KEYS = ("correlation", "External id", "stream", "device", "bytes", "blocks per SM", "Input type",
            "Collective name", "In msg nelems", "Group size", "Bytes", "Total Allocated", "Device Type", "Device Id")


def field_value(usual: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(usual, usual, numberish, json_values)


events = st.fixed_dictionaries(
    {"ph": field_value(st.sampled_from(("X", "i", "B", "f"))), "cat": field_value(st.sampled_from(CATS)),
     "name": field_value(st.sampled_from(("ProfilerStep#1", "[memory]", "aten::mm", "ncclKernel_AllReduce"))),
     "ts": field_value(st.floats(min_value=0, max_value=2e15)), "dur": field_value(st.floats(min_value=0,
                                                                                              max_value=1e6))},
    optional={"pid": field_value(st.integers(0, 2**20)), "tid": field_value(st.integers(0, 2**20)),
              "args": st.dictionaries(st.sampled_from(ARG_KEYS), field_value(st.integers(-1, 10**6)), max_size=5)
              | json_values})
documents = st.fixed_dictionaries({"traceEvents": st.lists(events, max_size=30)},
                                  optional={"deviceProperties": json_values | st.lists(st.fixed_dictionaries(
                                      {"id": numberish, "totalGlobalMem": numberish}), max_size=2),
                                      "distributedInfo": json_values | st.fixed_dictionaries(
                                          {"rank": numberish, "world_size": numberish}),
                                      "displayTimeUnit": st.sampled_from(("ns", "ms"))})


@SETTINGS
@given(doc=documents, gz=st.booleans())
def test_odd_events_read_the_same_whole_in_chunks_or_in_stretches(doc: dict[str, Any], gz: bool, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps(doc).encode()
    path = tmp_path / ("t.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(text) if gz else text)
    whole = read_or_line(path)
    with monkeypatch.context() as m:
        m.setattr("gpuscope.traces.kineto.CHUNKED_MIN_BYTES", 0)
        m.setattr("gpuscope.traces.split.CHUNK_EVENTS", 4)
        chunked = read_or_line(path)
        force_stretches(m, 3)
        apart = read_or_line(path)
    if isinstance(chunked, str) or isinstance(apart, str):
        assert apart == chunked
    else:
        assert_same(apart, chunked)
    if isinstance(whole, str) or isinstance(chunked, str):
        assert whole == chunked
        return
    assert_sane(whole)
    assert whole.names == chunked.names and whole.warnings == chunked.warnings
    for name in ("ts_ns", "dur_ns", "kind", "name_id", "stream", "bytes", "correlation"):
        assert np.array_equal(getattr(whole.events, name), getattr(chunked.events, name)), name


@SETTINGS
@given(rng=st.randoms(use_true_random=False))
def test_mutated_bundled_traces_read_or_fail_in_one_line(rng: random.Random, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSCOPE_MAX_TRACE_GIB", str(1 / 32))
    name, data = fi.mutated_trace(rng)
    path = tmp_path / name
    path.write_bytes(data)
    outcome = read_or_line(path)
    if not isinstance(outcome, str):
        assert_sane(outcome)


@SETTINGS
@given(junk=st.binary(max_size=2000), gz=st.booleans())
def test_arbitrary_bytes_read_or_fail_in_one_line(junk: bytes, gz: bool, tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(gzip.compress(junk) if gz else junk)
    outcome = read_or_line(path)
    if not isinstance(outcome, str):
        assert_sane(outcome)
