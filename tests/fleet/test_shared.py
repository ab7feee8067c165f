"""Fleet mode over a real Prometheus scraping an H100 node: a whole GPU, MIG instances in the real MIG scrape's
label dialect, and time-sliced GPUs reported for two pods each (one with per-pod SM use, one without)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from gpuscope.cli.fleet import fleet_prices
from gpuscope.fleet import FleetData, FleetReport, GroupReport, Prometheus, analyze_fleet, fetch_fleet, plan_window
from gpuscope.pricing import resolve_price
from tests.cli.helpers import gpuscope
from tests.fleet.conftest import STEP_S, FleetUnderTest
from tests.fleet.exporters import ReplayedGpu
from tests.fleet.test_prometheus import expected_busy, expected_hours


@pytest.fixture(scope="module")
def data(h100_prometheus: FleetUnderTest) -> FleetData:
    return fetch_fleet(Prometheus(h100_prometheus.url),
                       plan_window(h100_prometheus.start_s, h100_prometheus.end_s, STEP_S))


@pytest.fixture(scope="module")
def report(data: FleetData) -> FleetReport:
    return analyze_fleet(data, group_by="pod", prices=fleet_prices(data, None))


def groups(report: FleetReport) -> dict[str, GroupReport]:
    return {g.name.split("/")[-1]: g for g in report.groups}


def h100_usd() -> float:
    usd = resolve_price("NVIDIA H100 80GB HBM3").usd_per_gpu_hour
    assert usd is not None
    return usd


def test_the_mig_instances_are_gpus_of_their_own_with_their_profiles(data: FleetData) -> None:
    mig = sorted((g.gpu, g.mig_profile, g.pod) for g in data.gpus if g.gpu >= 1000)
    assert mig == [(2002, "3g.40gb", "slice-mid"), (2009, "1g.10gb", "slice-small"), (2010, "1g.10gb", None)]
    assert {g.model for g in data.gpus} == {"NVIDIA H100 80GB HBM3"}


def test_a_slice_pod_is_charged_its_share_of_a_whole_h100(report: FleetReport) -> None:
    g = groups(report)
    whole, small, mid = g["whole-0"], g["slice-small"], g["slice-mid"]
    assert small.gpu_hours == pytest.approx(whole.gpu_hours) == mid.gpu_hours  # the same hours
    assert whole.cost_usd is not None and small.cost_usd is not None and mid.cost_usd is not None
    assert whole.cost_usd == pytest.approx(whole.gpu_hours * h100_usd())
    assert 1 / 8 <= small.cost_usd / whole.cost_usd <= 1 / 7 + 1e-12
    assert 3 / 8 <= mid.cost_usd / whole.cost_usd <= 3 / 7 + 1e-12
    assert small.mig_profiles == ("1g.10gb",) and mid.mig_profiles == ("3g.40gb",) and whole.mig_profiles == ()
    assert report.busy_source == {"util": 5, "gr_engine_active": 3}


def test_each_slices_busy_share_is_its_gr_engine_active(report: FleetReport, h100_prometheus: FleetUnderTest) -> None:
    g = groups(report)
    for pod in ("slice-small", "slice-mid"):
        served = h100_prometheus.gpu(pod)  # GR_ENGINE_ACTIVE served as its utilisation / 100
        assert g[pod].busy == pytest.approx(expected_busy(served, h100_prometheus), abs=0.02), pod


def pod_sm_buckets(gpu: ReplayedGpu, fleet: FleetUnderTest) -> list[float]:
    """The per-pod SM share served in each bucket, its mean: what Prometheus' avg_over_time answers."""
    n = round((fleet.end_s - fleet.start_s) / STEP_S)
    out: list[list[float]] = [[] for _ in range(n)]
    for t, pct in gpu.served_pod_sm:
        i = math.ceil((t - fleet.start_s) / STEP_S) - 1
        if 0 <= i < n:
            out[i].append(pct / 100)
    return [float(np.mean(b)) for b in out]


def test_two_pods_on_one_gpu_pay_its_cost_once(report: FleetReport, h100_prometheus: FleetUnderTest) -> None:
    g = groups(report)
    usd = h100_usd()
    for first, second in (("tenant-a", "tenant-b"), ("tenant-c", "tenant-d")):
        gpu_cost = expected_hours(h100_prometheus.gpu(first), h100_prometheus) * usd  # the GPU's own hours
        both = (g[first].cost_usd or 0.0) + (g[second].cost_usd or 0.0)
        assert both == pytest.approx(gpu_cost, rel=0.05), (first, second)
        assert both < 1.5 * gpu_cost, "never charged twice"
    # No per-pod use on GPU 2: halves. Per-pod SM use on GPU 3: each bucket split as served.
    assert g["tenant-a"].cost_usd == pytest.approx(g["tenant-b"].cost_usd)
    assert g["tenant-a"].split == g["tenant-b"].split == "even"
    c, d = (pod_sm_buckets(h100_prometheus.gpu(p), h100_prometheus) for p in ("tenant-c", "tenant-d"))
    share_c = np.mean([x / (x + y) for x, y in zip(c, d)])
    assert g["tenant-c"].gpu_hours / (g["tenant-c"].gpu_hours + g["tenant-d"].gpu_hours) == pytest.approx(share_c,
                                                                                                          abs=0.02)
    assert g["tenant-c"].split == g["tenant-d"].split == "measured"
    assert report.shared_gpus == 2 and report.split == "mixed"
    assert g["whole-0"].split is None and g["whole-0"].shared_gpu_hours == 0


def test_the_fleet_command_shows_slices_and_shared_gpus(h100_prometheus: FleetUnderTest, tmp_path: Path) -> None:
    args = ["--prometheus", h100_prometheus.url, "--start", f"{h100_prometheus.start_s:.3f}", "--end",
            f"{h100_prometheus.end_s:.3f}", "--step", f"{STEP_S:g}s"]
    text = gpuscope("fleet", *args, home=tmp_path, COLUMNS="200")
    assert text.returncode == 0, text.stderr
    flat = " ".join(text.stdout.split())
    assert "2 GPUs shared between pods: each pod pays its part" in flat
    assert "MIG 1g.10gb" in flat and "shared, even" in flat and "shared, measured" in flat
    as_json = gpuscope("fleet", *args, "--json", home=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    saved = {g["name"]: g for g in json.loads(as_json.stdout)["groups"]}
    assert saved["ml/slice-small"]["mig_profiles"] == ["1g.10gb"] and saved["inference/tenant-a"]["split"] == "even"
