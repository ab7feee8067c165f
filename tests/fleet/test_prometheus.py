"""Fleet mode against a real Prometheus scraping replayed dcgm-exporters: groups, busy shares, gaps, idle GPUs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpuscope.cli.fleet import fleet_prices
from gpuscope.fleet import FleetReport, Prometheus, analyze_fleet, fetch_fleet, plan_window
from gpuscope.pricing import resolve_price
from tests.fleet.conftest import STEP_S, FleetUnderTest
from tests.fleet.exporters import ReplayedGpu

ALL_PODS = ("train-llama-0", "train-llama-1", "serve-sd-7d9c8b6f5-x2x4k", "serve-sd-7d9c8b6f5-q9z8w")


def buckets_of(gpu: ReplayedGpu, fleet: FleetUnderTest) -> list[list[float]]:
    """The utilisation shares served to Prometheus in each bucket (start + i step, start + (i + 1) step]."""
    n = round((fleet.end_s - fleet.start_s) / STEP_S)
    out: list[list[float]] = [[] for _ in range(n)]
    for t, util in gpu.served:
        i = math.ceil((t - fleet.start_s) / STEP_S) - 1
        if 0 <= i < n:
            out[i].append(util / 100)
    return out


def expected_busy(gpu: ReplayedGpu, fleet: FleetUnderTest) -> float:
    return float(np.mean([np.mean(b) for b in buckets_of(gpu, fleet) if b]))


def expected_hours(gpu: ReplayedGpu, fleet: FleetUnderTest) -> float:
    return sum(1 for b in buckets_of(gpu, fleet) if b) * STEP_S / 3600


@pytest.fixture(scope="module")
def data(prometheus: FleetUnderTest):  # type: ignore[no-untyped-def]
    return fetch_fleet(Prometheus(prometheus.url), plan_window(prometheus.start_s, prometheus.end_s, STEP_S))


def by_pod(data, group_by: str = "pod") -> FleetReport:  # type: ignore[no-untyped-def]
    return analyze_fleet(data, group_by=group_by, prices=fleet_prices(data, None))


def test_every_gpu_of_both_endpoints_is_found_with_its_workload_labels(data) -> None:  # type: ignore[no-untyped-def]
    pods = sorted((g.host, g.gpu, g.pod, g.namespace) for g in data.gpus)
    assert pods == [("node-a", 0, "train-llama-0", "ml"), ("node-a", 1, "train-llama-1", "ml"),
                    ("node-b", 0, "serve-sd-7d9c8b6f5-x2x4k", "inference"),
                    ("node-b", 1, "serve-sd-7d9c8b6f5-q9z8w", "inference"),
                    ("node-b", 2, None, None)]  # node-b's own pod label is the exporter's, not a workload's
    assert {g.model for g in data.gpus} == {"Tesla T4"}


def test_busy_share_and_gpu_hours_per_pod_match_what_was_served(prometheus: FleetUnderTest, data) -> None:  # type: ignore[no-untyped-def]
    report = by_pod(data)
    groups = {g.name.split("/")[-1]: g for g in report.groups}
    for pod in ALL_PODS:
        gpu = prometheus.gpu(pod)
        assert groups[pod].busy == pytest.approx(expected_busy(gpu, prometheus), abs=0.02), pod
        assert groups[pod].gpu_hours == pytest.approx(expected_hours(gpu, prometheus), abs=STEP_S / 3600), pod
        assert groups[pod].gpus == 1
    # the late GPU and the vanishing one have fewer hours than the window: their gaps are not counted
    window_h = (prometheus.end_s - prometheus.start_s) / 3600
    assert groups["train-llama-1"].gpu_hours <= window_h - 2 * STEP_S / 3600 + 1e-12
    assert groups["serve-sd-7d9c8b6f5-q9z8w"].gpu_hours <= window_h - 2 * STEP_S / 3600 + 1e-12
    assert groups["train-llama-0"].gpu_hours == pytest.approx(window_h)


def test_cost_and_waste_follow_the_t4_price(prometheus: FleetUnderTest, data) -> None:  # type: ignore[no-untyped-def]
    report = by_pod(data)
    price = resolve_price("Tesla T4").usd_per_gpu_hour
    assert price is not None
    for g in report.groups:
        assert g.cost_usd == pytest.approx(g.gpu_hours * price)
        assert g.wasted_usd is not None and g.idle_usd is not None and g.underused_usd is not None
        assert g.wasted_usd == pytest.approx(g.idle_usd + g.underused_usd)
        assert 0 <= g.wasted_usd <= g.cost_usd + 1e-12
    train = next(g for g in report.groups if g.name == "ml/train-llama-0")
    assert train.idle_usd == 0
    assert train.underused_usd == pytest.approx(train.cost_usd * (1 - train.busy))  # type: ignore[operator]
    assert report.cost_usd == pytest.approx(sum(g.cost_usd or 0 for g in report.groups))


def test_only_the_pod_holding_an_idle_gpu_is_listed_idle(prometheus: FleetUnderTest, data) -> None:  # type: ignore[no-untyped-def]
    report = by_pod(data)
    assert [(i.host, i.gpu, i.group) for i in report.idle_gpus] == [
        ("node-b", 1, "inference/serve-sd-7d9c8b6f5-q9z8w")]
    idle = report.idle_gpus[0]
    assert idle.busy == 0 and idle.idle_share == 1.0
    assert idle.gpu_hours == pytest.approx(expected_hours(prometheus.gpu("serve-sd-7d9c8b6f5-q9z8w"), prometheus),
                                           abs=STEP_S / 3600)
    group = next(g for g in report.groups if g.name == idle.group)
    assert group.idle_gpu_hours == pytest.approx(group.gpu_hours)  # idle only while it reported
    assert group.wasted_usd == pytest.approx(group.cost_usd)
    free = next(g for g in report.groups if g.name == "(no pod)")
    assert free.busy == 0  # a GPU no pod holds is free capacity, not a held idle GPU
    codes = [r.code for r in report.recommendations]
    assert codes[0] == "release_idle_gpus"
    assert report.recommendations[0].est_saving_usd == pytest.approx(idle.cost_usd)


def test_group_by_job_namespace_and_host(prometheus: FleetUnderTest, data) -> None:  # type: ignore[no-untyped-def]
    jobs = {g.name: g for g in by_pod(data, "job").groups}
    assert set(jobs) == {"ml/train-llama", "inference/serve-sd", "(no job)"}
    assert jobs["ml/train-llama"].gpus == 2 and jobs["inference/serve-sd"].gpus == 2
    train = [prometheus.gpu("train-llama-0"), prometheus.gpu("train-llama-1")]
    hours = [expected_hours(g, prometheus) for g in train]
    weighted = sum(expected_busy(g, prometheus) * h for g, h in zip(train, hours)) / sum(hours)
    assert jobs["ml/train-llama"].busy == pytest.approx(weighted, abs=0.02)
    assert {g.name for g in by_pod(data, "namespace").groups} == {"ml", "inference", "(no namespace)"}
    hosts = {g.name: g for g in by_pod(data, "host").groups}
    assert set(hosts) == {"node-a", "node-b"} and hosts["node-b"].gpus == 3
    assert {g.name for g in by_pod(data, "label=modelname").groups} == {"Tesla T4"}


def test_energy_is_the_counter_increase(prometheus: FleetUnderTest, data) -> None:  # type: ignore[no-untyped-def]
    report = by_pod(data, "host")
    node_a = next(g for g in report.groups if g.name == "node-a")
    # The counter grows by each scrape's power over one second; Prometheus' increase() extrapolates to the
    # bucket edges, so the two agree to within a scrape or so per bucket.
    served_j = sum(g.power_w(u) for g in prometheus.exporters[0].gpus for t, u in g.served
                   if prometheus.start_s < t <= prometheus.end_s)
    assert node_a.energy_kwh == pytest.approx(served_j / 3.6e6, rel=0.25)
