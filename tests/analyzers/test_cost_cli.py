"""The cost part of `gpuscope analyze`, `show` and `prices`, run as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuscope.pricing import ENV_GRID, ENV_PRICE
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

DATALOADER_BOUND = str(SAMPLES / "resnet50_dataloader_bound")
COST_KEYS = {"gpu_hours", "usd_per_gpu_hour", "price_source", "total_usd", "wasted_usd", "waste_by_cause_usd",
             "energy_kwh", "co2_kg", "per_step_usd", "per_1k_steps_usd", "projected_usd", "note"}
CAUSES = {"idle", "data_loading", "host_overhead", "communication", "memory", "unattributed", "outlier_steps"}
STALLS = ("idle", "data_loading", "host_overhead", "communication", "memory")


@pytest.fixture(autouse=True)
def no_price_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_PRICE, raising=False)
    monkeypatch.delenv(ENV_GRID, raising=False)


def analyze(home: Path, *args: str, **env: str) -> dict[str, Any]:
    result = gpuscope("analyze", *args, "--json", "--no-save", home=home, **env)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_cost_of_the_dataloader_bound_sample(tmp_path: Path) -> None:
    report = analyze(tmp_path, DATALOADER_BOUND)
    cost, rank = report["cost"], report["ranks"][0]
    assert COST_KEYS <= cost.keys() and set(cost["waste_by_cause_usd"]) == CAUSES
    assert cost["gpu_hours"] == pytest.approx(rank["window_us"] / 3.6e9)
    assert cost["usd_per_gpu_hour"] == 3.9015  # Tesla V100-DGXS-32GB -> the catalog's V100 32GB
    assert cost["price_source"].startswith("catalog: AWS p3dn.24xlarge")
    assert cost["total_usd"] == pytest.approx(cost["gpu_hours"] * 3.9015)
    assert 0 < cost["wasted_usd"] < cost["total_usd"]
    assert sum(cost["waste_by_cause_usd"].values()) == pytest.approx(cost["wasted_usd"])
    # The TensorBoard plugin puts 33.4% of this job's step time in the DataLoader.
    assert cost["waste_by_cause_usd"]["data_loading"] / cost["total_usd"] == pytest.approx(0.334, abs=0.002)
    assert cost["per_step_usd"] == pytest.approx(rank["step_time_us"] / 3.6e9 * 3.9015)
    assert cost["energy_kwh"] is None and cost["co2_kg"] is None and cost["note"] is None
    for rec in report["recommendations"]:
        if rec["est_step_saving"] is not None and rec["code"] != "right_size":
            assert rec["est_saving_usd"] == pytest.approx(rec["est_step_saving"] * cost["total_usd"])


@pytest.mark.parametrize("sample", ["resnet50_dataloader_bound", "resnet50_workers4", "dlrm_8rank"])
def test_one_story_the_verdict_and_the_cost_split_read_the_same_stage_shares(tmp_path: Path, sample: str) -> None:
    report = analyze(tmp_path, str(SAMPLES / sample), "--usd-per-gpu-hour", "1")
    shares, cost, evidence = report["stage_shares"], report["cost"], report["verdict"]["evidence"]
    assert set(shares) == set(STALLS) | {"gpu_compute"}
    # The stage shares are of the typical step; the outlier steps' time over it (on every GPU) is waste of its own,
    # and the stages share the rest of the run's time.
    gpus = sum(len(r["devices"]) or 1 for r in report["ranks"])
    outliers = sum(o["extra_us"] for o in report["outlier_steps"]) * gpus / sum(
        r["window_us"] * (len(r["devices"]) or 1) for r in report["ranks"])
    assert (cost["waste_by_cause_usd"]["outlier_steps"] or 0.0) / cost["total_usd"] == pytest.approx(outliers)
    for stage in STALLS:
        assert cost["waste_by_cause_usd"][stage] / cost["total_usd"] == pytest.approx(shares[stage] * (1 - outliers),
                                                                                     abs=1e-9)
        assert evidence[f"{stage}_share"] == pytest.approx(shares[stage])
    assert cost["waste_by_cause_usd"]["unattributed"] == pytest.approx(0.0, abs=1e-9)
    top_stall = max(STALLS, key=lambda st: shares[st])
    largest_cost = max(STALLS, key=lambda st: cost["waste_by_cause_usd"][st])
    assert top_stall == largest_cost
    if report["verdict"]["primary"] != "gpu_compute":
        assert report["verdict"]["primary"] == top_stall


def test_the_flag_beats_the_env_which_beats_the_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[prices]\nusd_per_gpu_hour = 1.5\n")
    assert analyze(home, DATALOADER_BOUND)["cost"]["price_source"] == f"config {home / 'config.toml'} [prices]"
    by_env = analyze(home, DATALOADER_BOUND, **{ENV_PRICE: "2.5"})["cost"]
    assert (by_env["usd_per_gpu_hour"], by_env["price_source"]) == (2.5, f"env {ENV_PRICE}")
    by_flag = analyze(home, DATALOADER_BOUND, "--usd-per-gpu-hour", "2", "--job-hours", "10",
                      **{ENV_PRICE: "2.5"})["cost"]
    assert (by_flag["usd_per_gpu_hour"], by_flag["price_source"]) == (2.0, "--usd-per-gpu-hour")
    assert by_flag["projected_usd"] == pytest.approx(20.0) and by_flag["projection_basis"] == "job_hours"


def test_a_trace_without_a_gpu_model_has_a_null_cost_and_says_how_to_price_it(tmp_path: Path) -> None:
    cost = analyze(tmp_path, str(SAMPLES / "resnet50_old_schema"))["cost"]
    assert cost["gpu_hours"] > 0
    assert cost["total_usd"] is None and cost["wasted_usd"] is None and cost["usd_per_gpu_hour"] is None
    for words in ("--usd-per-gpu-hour", ENV_PRICE, "config.toml"):
        assert words in cost["note"]
    priced = analyze(tmp_path, str(SAMPLES / "resnet50_old_schema"), "--usd-per-gpu-hour", "1")["cost"]
    assert priced["total_usd"] == pytest.approx(priced["gpu_hours"]) and priced["note"] is None


def test_eight_ranks_are_eight_gpus(tmp_path: Path) -> None:
    report = analyze(tmp_path, str(SAMPLES / "dlrm_8rank"), "--usd-per-gpu-hour", "1")
    cost = report["cost"]
    assert cost["gpu_count"] == 8
    assert cost["gpu_hours"] == pytest.approx(sum(r["window_us"] for r in report["ranks"]) / 3.6e9)
    assert cost["waste_by_cause_usd"]["communication"] > 0


def test_terminal_shows_cost_waste_and_the_price_source(tmp_path: Path) -> None:
    result = gpuscope("analyze", DATALOADER_BOUND, "--no-save", "--job-hours", "100", home=tmp_path)
    assert result.returncode == 0, result.stderr
    for words in ("Cost", "GPU-h", "p3dn.24xlarge", "wasted", "data loading 33.4%", "whole job $390",
                  "energy n/a"):
        assert words in result.stdout


def test_a_bad_price_setting_is_one_clear_line(tmp_path: Path) -> None:
    result = gpuscope("analyze", DATALOADER_BOUND, "--no-save", home=tmp_path, **{ENV_PRICE: "cheap"})
    assert result.returncode == 2
    assert ENV_PRICE in one_clean_error_line(result)


def test_show_reanalyzes_with_a_new_price(tmp_path: Path) -> None:
    saved = gpuscope("analyze", DATALOADER_BOUND, "--json", home=tmp_path)
    run_id = json.loads(saved.stdout)["run"]["id"]
    shown = gpuscope("show", run_id, "--usd-per-gpu-hour", "10", "--job-steps", "1000", "--json", home=tmp_path)
    assert shown.returncode == 0, shown.stderr
    cost = json.loads(shown.stdout)["cost"]
    assert cost["usd_per_gpu_hour"] == 10.0 and cost["projected_usd"] == pytest.approx(1000 * cost["per_step_usd"])
    again = gpuscope("show", run_id, "--reanalyze", "--json", home=tmp_path)
    assert json.loads(again.stdout)["cost"]["usd_per_gpu_hour"] == 3.9015


def test_prices_lists_the_catalog_and_resolves_a_gpu(tmp_path: Path) -> None:
    listing = gpuscope("prices", "--json", home=tmp_path)
    assert listing.returncode == 0, listing.stderr
    doc = json.loads(listing.stdout)
    models = {g["model"]: g for g in doc["gpus"]}
    assert models["A10G"]["usd_per_gpu_hour"] == 1.006 and models["A10G"]["source"]
    assert doc["grid"]["kg_co2_per_kwh"] > 0 and doc["resolved"] is None
    resolved = json.loads(gpuscope("prices", "--json", "--gpu", "NVIDIA A10G", home=tmp_path,
                                   **{ENV_PRICE: "0.9"}).stdout)["resolved"]
    assert resolved == {"gpu": "NVIDIA A10G", "catalog_model": "A10G", "usd_per_gpu_hour": 0.9,
                        "source": f"env {ENV_PRICE}", "note": None}
    text = gpuscope("prices", "--gpu", "NVIDIA GeForce RTX 4090", home=tmp_path)
    assert text.returncode == 0 and "not in the price catalog" in text.stdout and "[prices]" in text.stdout
    # A name that could be three cards at three prices is refused with the choices, never priced as one of them.
    ambiguous = gpuscope("prices", "--gpu", "NVIDIA H100", home=tmp_path)
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    assert "could be any of H100 SXM 80GB, H100 PCIe or H100 NVL" in one_clean_error_line(ambiguous)
    table = gpuscope("prices", home=tmp_path)
    assert "H100 SXM 80GB" in table.stdout and "p5.48xlarge" in table.stdout and "Ember" in table.stdout
