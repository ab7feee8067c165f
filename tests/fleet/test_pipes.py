"""DCGM's profiling fields in the fleet, through a real Prometheus scraping the replayed H100 node: tensor-pipe
activity beside SM active per group (n/a where the exporter gives none), and the rule a live run is judged by
turned into advice for the groups whose tensor cores sat idle while their SMs worked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscope.cli.fleet import fleet_prices
from gpuscope.fleet import FleetReport, GroupReport, Prometheus, analyze_fleet, fetch_fleet, plan_window
from tests.cli.helpers import gpuscope
from tests.fleet.conftest import STEP_S, TENANT_A_PROF, WHOLE_0_PROF, FleetUnderTest


@pytest.fixture(scope="module")
def report(h100_prometheus: FleetUnderTest) -> FleetReport:
    data = fetch_fleet(Prometheus(h100_prometheus.url),
                       plan_window(h100_prometheus.start_s, h100_prometheus.end_s, STEP_S))
    return analyze_fleet(data, group_by="pod", prices=fleet_prices(data, None))


def groups(report: FleetReport) -> dict[str, GroupReport]:
    return {g.name.split("/")[-1]: g for g in report.groups}


def test_each_group_has_the_counters_its_exporter_served_and_na_for_the_rest(report: FleetReport) -> None:
    g = groups(report)
    # Served at a constant value every scrape: avg_over_time of each bucket is that value.
    assert g["whole-0"].sm_active == pytest.approx(WHOLE_0_PROF["DCGM_FI_PROF_SM_ACTIVE"])
    assert g["whole-0"].tensor_active == pytest.approx(WHOLE_0_PROF["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"])
    assert g["whole-0"].sm_occupancy == pytest.approx(WHOLE_0_PROF["DCGM_FI_PROF_SM_OCCUPANCY"])
    assert g["whole-0"].dram_active == pytest.approx(WHOLE_0_PROF["DCGM_FI_PROF_DRAM_ACTIVE"])
    assert g["tenant-a"].tensor_active == pytest.approx(TENANT_A_PROF["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"])
    assert g["tenant-a"].sm_occupancy is None and g["tenant-a"].dram_active is None
    for name in ("slice-small", "slice-mid", "tenant-b"):  # not scraped: unknown, never 0
        assert g[name].sm_active is None and g[name].tensor_active is None and g[name].sm_occupancy is None


def test_tensor_cores_idle_while_the_sms_work_is_advice_for_that_group_alone(report: FleetReport) -> None:
    (rec,) = [r for r in report.recommendations if r.code == "tensor_cores"]
    assert rec.title.startswith("1 group left the tensor cores idle")
    assert "ml/whole-0 (SM active 85%, tensor pipes 3%" in rec.detail and "tenant-a" not in rec.detail
    assert "torch.autocast" in rec.detail and rec.est_saving_usd is None  # counters alone size no saving


def test_the_fleet_command_shows_tensor_pipes_beside_sm_active(h100_prometheus: FleetUnderTest, tmp_path: Path) -> None:
    args = ["--prometheus", h100_prometheus.url, "--start", f"{h100_prometheus.start_s:.3f}", "--end",
            f"{h100_prometheus.end_s:.3f}", "--step", f"{STEP_S:g}s"]
    text = gpuscope("fleet", *args, home=tmp_path, COLUMNS="220")
    assert text.returncode == 0, text.stderr
    rows = {line.split()[0]: line for line in text.stdout.splitlines() if line.strip().startswith(("ml/", "infer"))}
    assert "85% · 3%" in rows["ml/whole-0"] and "70% · 45%" in rows["inference/tenant-a"]
    assert "n/a · n/a" in rows["ml/slice-small"]
    doc = json.loads(gpuscope("fleet", *args, "--json", home=tmp_path).stdout)
    saved = {g["name"]: g for g in doc["groups"]}
    assert saved["ml/whole-0"]["tensor_active"] == pytest.approx(0.03)
    assert saved["ml/slice-mid"]["tensor_active"] is None
