"""benchmarks/bench_fleet.py at a small size: its loopback answers go through the real query path, and what the
analysis finds is what the generated samples hold."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import ModuleType

import numpy as np

from gpuscope.fleet import Prometheus, fetch_fleet, plan_window
from gpuscope.model.fleet import UTIL
from tests.conftest import load_benchmark


def _bench() -> ModuleType:
    return load_benchmark("bench_fleet")


bench = _bench()


def test_small_fleet_through_the_query_path(tmp_path: Path) -> None:
    step_s, scrape_s, end_s = 120.0, 15.0, 1_800_000_000.0
    window = plan_window(end_s - 3600, end_s, step_s)
    util = bench.fleet_samples(24, 1.0, scrape_s)
    server = bench.serve(bench.answers(util, window.start_ns / 1e9, step_s, window.buckets, scrape_s))
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        data = fetch_fleet(Prometheus(url), window)
        stages = bench.stages(url, window.start_ns / 1e9, end_s, step_s, str(tmp_path))
    finally:
        server.shutdown()
        server.server_close()
    assert len(data.gpus) == 24 and stages["gpus"] == 24
    per = int(step_s / scrape_s)
    with warnings.catch_warnings():  # a step without a sample is a gap: NaN on both sides
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.nanmean(util[:, : window.buckets * per].reshape(24, window.buckets, per), axis=2) / 100
    got = data.metric(UTIL)
    order = [int(g.uuid[4:12], 16) for g in data.gpus if g.uuid]  # the bench numbers GPUs in their UUIDs
    np.testing.assert_allclose(got, expected[order], rtol=1e-5, atol=1e-7)
