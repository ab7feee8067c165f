"""The fleet analysis on data built in code: definitions, gaps, sources, unknown prices, advice, invariants."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.fleet import FleetData, FleetWindow, Thresholds, analyze_fleet
from gpuscope.model.cost import GpuOffer, MigProfile, Price
from gpuscope.model.fleet import GR_ENGINE, MEMORY_USED_BYTES, METRICS, POD_SM_UTIL, POWER_W, UTIL, GpuSeriesInfo

NAN = float("nan")
STEP_NS = 60 * 10**9


def fleet(rows: dict[tuple[str, int, str | None], dict[str, list[float]]], *, model: str = "H100") -> FleetData:
    """A FleetData whose GPU (host, index, pod) has the given per-bucket metric values."""
    buckets = max(len(v) for m in rows.values() for v in m.values())
    values = np.full((len(rows), len(METRICS), buckets), np.nan)
    gpus = []
    for g, ((host, index, pod), metrics) in enumerate(rows.items()):
        gpus.append(GpuSeriesInfo(host=host, gpu=index, uuid=f"GPU-{host}-{index}", model=model, pod=pod,
                                  namespace="ns" if pod else None, labels={"team": "a" if index % 2 else "b"}))
        for name, series in metrics.items():
            values[g, METRICS.index(name), : len(series)] = series
    return FleetData(prometheus_url="http://prom:9090", selector="", window=FleetWindow(0, STEP_NS, buckets),
                     gpus=tuple(gpus), metrics=METRICS, values=values)


def price(usd: float | None, offers: tuple[GpuOffer, ...] = ()) -> Price:
    return Price(usd_per_gpu_hour=usd, source="test" if usd is not None else None, gpu_model="H100",
                 catalog_model="H100 SXM 80GB", offers=offers)


def test_gaps_are_neither_busy_nor_idle() -> None:
    data = fleet({("a", 0, "p"): {UTIL: [0.5, NAN, NAN, 0.5]}, ("a", 1, "q"): {UTIL: [0.0, NAN, 0.0, NAN]}})
    report = analyze_fleet(data, prices={"H100": price(10.0)})
    groups = {g.name: g for g in report.groups}
    assert groups["ns/p"].gpu_hours == pytest.approx(2 / 60) and groups["ns/p"].busy == 0.5
    assert groups["ns/q"].idle_gpu_hours == pytest.approx(2 / 60)
    assert groups["ns/q"].cost_usd == pytest.approx(10 * 2 / 60) == groups["ns/q"].wasted_usd
    assert groups["ns/p"].underused_usd == pytest.approx(0.5 * 10 * 2 / 60)
    assert report.timeline_busy == (0.25, None, 0.0, 0.5)


def test_unknown_price_is_null_never_zero() -> None:
    data = fleet({("a", 0, "p"): {UTIL: [0.0, 0.0]}})
    report = analyze_fleet(data, prices={"H100": price(None)})
    assert report.groups[0].cost_usd is None and report.groups[0].wasted_usd is None
    assert report.cost_usd is None and report.idle_gpus[0].cost_usd is None
    assert report.recommendations[0].est_saving_usd is None
    assert any("no price for H100" in w for w in report.warnings)


def test_busy_falls_back_to_the_gr_engine_where_there_is_no_dev_utilisation() -> None:
    data = fleet({("a", 1003, "mig"): {GR_ENGINE: [0.2, 0.4]},
                  ("a", 0, "p"): {UTIL: [0.9, 0.9], GR_ENGINE: [0.1, 0.1]}})
    report = analyze_fleet(data, prices={"H100": price(1.0)})
    groups = {g.name: g for g in report.groups}
    assert groups["ns/mig"].busy == pytest.approx(0.3) and groups["ns/p"].busy == pytest.approx(0.9)
    assert report.busy_source == {UTIL: 1, GR_ENGINE: 1}


def test_idle_gpus_are_held_and_idle_most_of_their_time() -> None:
    data = fleet({("a", 0, "held"): {UTIL: [0.0] * 9 + [0.5]}, ("a", 1, "busy"): {UTIL: [0.0] * 5 + [0.6] * 5},
                  ("a", 2, None): {UTIL: [0.0] * 10}})
    report = analyze_fleet(data, prices={"H100": price(2.0)}, thresholds=Thresholds(idle_share=0.8))
    assert [(i.gpu, i.group) for i in report.idle_gpus] == [(0, "ns/held")]
    assert report.idle_gpus[0].idle_share == pytest.approx(0.9)


def test_without_pod_labels_every_gpu_is_held_by_its_host() -> None:
    data = fleet({("slurm-1", 0, None): {UTIL: [0.0, 0.0]}, ("slurm-1", 1, None): {UTIL: [0.8, 0.9]}})
    report = analyze_fleet(data, group_by="host", prices={"H100": price(2.0)})
    assert [(i.host, i.gpu, i.group) for i in report.idle_gpus] == [("slurm-1", 0, "slurm-1")]
    assert report.groups[0].gpus == 2


def test_a_gpu_time_sliced_between_pods_is_paid_for_once() -> None:
    data = fleet({("a", 0, "p"): {UTIL: [0.4, 0.4, 0.4, NAN], POWER_W: [100.0] * 4},
                  ("a", 0, "q"): {UTIL: [0.4, 0.4, NAN, NAN], POWER_W: [100.0, 100.0, NAN, NAN]}})
    report = analyze_fleet(data, prices={"H100": price(6.0)})
    groups = {g.name: g for g in report.groups}
    assert report.gpus == 1 and report.gpu_hours == pytest.approx(3 / 60)  # three buckets of one GPU
    assert groups["ns/p"].gpu_hours == pytest.approx(2 / 60) and groups["ns/q"].gpu_hours == pytest.approx(1 / 60)
    assert report.cost_usd == pytest.approx(6.0 * 3 / 60) and report.busy == pytest.approx(0.4)
    assert report.energy_kwh == pytest.approx(100 * 4 * 60 / 3.6e6)  # the lone power sample of bucket 4 counts


def test_a_shared_gpus_cost_is_split_by_the_pods_measured_use_where_each_has_it() -> None:
    # p used 60% and q 20% of the SMs in the first two buckets: 3/4 and 1/4; p's series lacks the third: halves.
    data = fleet({("a", 0, "p"): {UTIL: [0.8, 0.8, 0.8], POD_SM_UTIL: [0.6, 0.6, NAN]},
                  ("a", 0, "q"): {UTIL: [0.8, 0.8, 0.8], POD_SM_UTIL: [0.2, 0.2, 0.2]},
                  ("a", 1, "r"): {UTIL: [0.5, 0.5, 0.5]}})
    report = analyze_fleet(data, prices={"H100": price(6.0)})
    groups = {g.name: g for g in report.groups}
    assert groups["ns/p"].gpu_hours == pytest.approx((0.75 + 0.75 + 0.5) / 60)
    assert groups["ns/q"].gpu_hours == pytest.approx((0.25 + 0.25 + 0.5) / 60)
    assert groups["ns/p"].cost_usd + groups["ns/q"].cost_usd == pytest.approx(6.0 * 3 / 60)  # the GPU's, once
    assert groups["ns/p"].split == groups["ns/q"].split == "mixed" and groups["ns/r"].split is None
    assert groups["ns/p"].shared_gpu_hours == groups["ns/p"].gpu_hours and groups["ns/r"].shared_gpu_hours == 0
    assert report.shared_gpus == 1 and report.split == "mixed"


def test_mig_instances_are_charged_their_compute_slices() -> None:
    h100 = replace(price(7.0), mig_profiles=tuple(MigProfile.parse(p) for p in ("1g.10gb", "3g.40gb", "7g.80gb")))
    data = fleet({("a", 0, "whole"): {UTIL: [0.5, 0.5]}, ("a", 1009, "small"): {GR_ENGINE: [0.2, 0.4]},
                  ("a", 1002, "mid"): {GR_ENGINE: [0.5, 0.5]}, ("a", 1007, "odd"): {GR_ENGINE: [0.5, 0.5]}})
    profiles = {1009: "1g.10gb", 1002: "3g.40gb", 1007: None}
    data = replace(data, gpus=tuple(replace(g, mig_profile=profiles.get(g.gpu)) for g in data.gpus))
    report = analyze_fleet(data, prices={"H100": h100})
    groups = {g.name: g for g in report.groups}
    assert groups["ns/whole"].cost_usd == pytest.approx(7.0 * 2 / 60)
    assert groups["ns/small"].cost_usd == pytest.approx(1.0 * 2 / 60) and groups["ns/small"].busy == pytest.approx(0.3)
    assert groups["ns/mid"].cost_usd == pytest.approx(3.0 * 2 / 60)
    assert groups["ns/odd"].cost_usd is None, "an instance without a profile label has no known share"
    assert any("H100 MIG (no profile label)" in w for w in report.warnings)
    assert groups["ns/small"].mig_profiles == ("1g.10gb",) and groups["ns/whole"].mig_profiles == ()


def test_a_pod_using_a_small_part_of_a_whole_gpu_is_told_the_slice_it_fits() -> None:
    h100 = replace(price(7.0), mig_profiles=tuple(MigProfile.parse(p) for p in (
        "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")))
    data = fleet({("a", 0, "svc"): {UTIL: [0.1, 0.1], MEMORY_USED_BYTES: [8e9, 8e9]},
                  ("a", 1, "big"): {UTIL: [0.1, 0.1], MEMORY_USED_BYTES: [70e9, 70e9]}})
    report = analyze_fleet(data, prices={"H100": h100})
    (rec,) = [r for r in report.recommendations if r.code == "mig_slice"]
    # 10% of the SMs on one of 7 slices would be 70% busy: two slices (35%); 8 GB x 1.25 fits 20 GB; 2/7 of the
    # price, so 5/7 of 7 USD an hour saved. The 70 GB pod fits no slice under the whole GPU.
    assert rec.title == "ns/svc: fits on a MIG 2g.20gb slice (or MPS), saves $5.00/h per GPU"
    assert rec.est_saving_usd == pytest.approx(5.0 * 2 / 60)


def test_group_by_label_and_gpu() -> None:
    data = fleet({("a", 0, "p"): {UTIL: [0.1]}, ("a", 1, "q"): {UTIL: [0.2]}, ("b", 3, "r"): {UTIL: [0.3]}})
    assert {g.name for g in analyze_fleet(data, group_by="label=team", prices={}).groups} == {"a", "b"}
    assert {g.name for g in analyze_fleet(data, group_by="gpu", prices={}).groups} == {"a/gpu0", "a/gpu1", "b/gpu3"}


TABLE: dict[str, frozenset[str]] = {
    "H100": frozenset({"bf16", "fp16", "tf32", "flash_attention_2"}),
    "L4": frozenset({"bf16", "fp16", "fp8", "tf32", "flash_attention_2"}),
    "T4": frozenset({"fp16"}),
    "V100": frozenset({"fp16"}),
}
"""What each GPU supports, made up for the tests: a fleet's right-sizing reads it, not the shipped table."""


def test_lightly_used_gpus_are_advised_to_share_and_right_size() -> None:
    rows = {("a", i, f"svc-{i}"): {UTIL: [0.1, 0.2], MEMORY_USED_BYTES: [8e9, 9e9], POWER_W: [100.0, 100.0]}
            for i in range(4)}
    offers = (GpuOffer("L4", 0.8, 24 * 10**9, "cat"), GpuOffer("T4", 0.5, 16 * 10**9, "cat"))
    report = analyze_fleet(fleet(rows), prices={"H100": price(6.88, offers)}, capabilities=TABLE.get)
    codes = {r.code: r for r in report.recommendations}
    share = codes["share_gpus"]
    assert "1 would do" in share.title
    assert share.est_saving_usd == pytest.approx(report.cost_usd * 3 / 4)  # type: ignore[operator]
    right = codes["right_size"]
    assert "L4" in right.title and right.est_saving_usd == pytest.approx((6.88 - 0.8) * 2 / 60)
    assert report.energy_kwh == pytest.approx(4 * 2 * 100 * 60 / 3.6e6)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=1, max_size=12), min_size=1, max_size=6))
def test_shares_in_range_and_waste_within_cost(series: list[list[float | None]]) -> None:
    rows = {("h", i, f"p{i}"): {UTIL: [NAN if v is None else v for v in s]} for i, s in enumerate(series)}
    report = analyze_fleet(fleet(rows), prices={"H100": price(3.0)})
    for g in report.groups:
        assert g.busy is None or 0 <= g.busy <= 1
        assert g.cost_usd is not None and g.wasted_usd is not None
        assert -1e-9 <= g.wasted_usd <= g.cost_usd + 1e-9
        assert g.idle_gpu_hours <= g.gpu_hours + 1e-12
    assert report.gpu_hours == pytest.approx(sum(g.gpu_hours for g in report.groups))


def test_a_fleet_is_offered_only_gpus_that_support_what_its_gpus_do() -> None:
    """A fleet does not say which types its jobs use: the cheaper GPU must support everything theirs does (but TF32,
    which only changes speed). Here the cheapest and dearest cheaper GPUs lack bf16: the L4 between them is picked,
    and nothing when it is missing; a GPU the table does not know is never offered."""
    rows = {("a", 0, "svc"): {UTIL: [0.1, 0.2], MEMORY_USED_BYTES: [8e9, 9e9]}}
    offers = (GpuOffer("V100", 3.0, 32 * 10**9, "cat"), GpuOffer("L4", 0.8, 24 * 10**9, "cat"),
              GpuOffer("T4", 0.5, 16 * 10**9, "cat"), GpuOffer("X9", 2.0, 80 * 10**9, "cat"))

    def right(offered: tuple[GpuOffer, ...], table: dict[str, frozenset[str]]) -> list[str]:
        report = analyze_fleet(fleet(rows), prices={"H100": price(6.88, offered)}, capabilities=table.get)
        return [r.title for r in report.recommendations if r.code == "right_size"]

    assert right(offers, TABLE) == ["ns/svc: try a L4 at $0.80/GPU-h"]
    assert right(tuple(o for o in offers if o.model != "L4"), TABLE) == []
    assert right(offers, {}) == []  # no GPU known: not even today's, so nothing to hold a cheaper one to
