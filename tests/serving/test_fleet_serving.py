"""`gpuscope fleet` over a real Prometheus that scrapes an H100 node's dcgm-exporter and four inference servers:
each pod's tokens, load and latency, priced at its own GPUs (a whole H100, a MIG slice, half a time-sliced H100),
and the advice each one's metrics call for. Every expected value is known by construction (tests/serving/
conftest.py, tests/serving/endpoints.py), not read from gpuscope."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import gpuscope
from tests.serving.conftest import ServingFleet
from tests.serving.endpoints import TTFT_P50_S, TTFT_P90_S, TTFT_P99_S, TTFT_PER_S, TTFT_SUM_PER_S

USD_PER_GPU_HOUR = 3.6
H100_SLICES = 7
"""An H100's MIG compute slices: a 3g.40gb instance is 3 of them."""
T4_LIKE_POWER_W = 9 + 0.61 * 35
"""The replayed exporter's power at 35% busy (tests/fleet/exporters.py: 9 W + 0.61 W per percent)."""


@pytest.fixture(scope="module")
def fleet_json(serving_fleet: ServingFleet, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    home = tmp_path_factory.mktemp("home")
    result = gpuscope("fleet", *serving_fleet.window_args(), "--usd-per-gpu-hour", str(USD_PER_GPU_HOUR), "--json",
                      home=home)
    assert result.returncode == 0, result.stderr
    return home, json.loads(result.stdout)


def pods(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["pod"]: p for p in report["serving"]}


def test_the_done_case_one_h100_at_35_percent_and_1000_tokens_a_second(fleet_json: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    vllm = pods(fleet_json[1])["vllm-0"]["metrics"]
    assert vllm["engine"] == "vllm"
    assert vllm["output_tokens_per_s"] == pytest.approx(1000, rel=0.1)
    # $3.60 an hour is $0.001 a second; at 1,000 tokens a second a million tokens take 1,000 s: $1.00.
    assert vllm["usd_per_million_output_tokens"] == pytest.approx(1.00, rel=0.1)
    assert vllm["prompt_tokens_per_s"] == pytest.approx(4000, rel=0.1)
    assert vllm["usd_per_million_prompt_tokens"] == pytest.approx(0.25, rel=0.1)
    assert vllm["usd_per_million_tokens"] == pytest.approx(0.20, rel=0.1)
    assert vllm["usd_per_hour"] == pytest.approx(USD_PER_GPU_HOUR, rel=1e-6)
    assert vllm["gpu_busy"] == pytest.approx(0.35)
    assert (vllm["requests_running"], vllm["requests_waiting"], vllm["requests_waiting_max"]) == (3, 0, 0)
    assert vllm["kv_cache_usage"] == pytest.approx(0.2) and vllm["kv_cache_usage_max"] == pytest.approx(0.2)
    assert vllm["joules_per_output_token"] == pytest.approx(T4_LIKE_POWER_W / 1000, rel=0.1)


def test_latency_percentiles_come_from_the_histograms(fleet_json: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    for pod in ("vllm-0", "sglang-0", "vllm-kv-0"):
        ttft = pods(fleet_json[1])[pod]["metrics"]["ttft"]
        assert (ttft["p50_s"], ttft["p90_s"]) == (pytest.approx(TTFT_P50_S), pytest.approx(TTFT_P90_S))
        assert ttft["p99_s"] == pytest.approx(TTFT_P99_S)
        assert ttft["mean_s"] == pytest.approx(TTFT_SUM_PER_S / TTFT_PER_S, rel=1e-3)
    assert pods(fleet_json[1])["tgi-0"]["metrics"]["ttft"] is None, "TGI exports no time to first token"


def test_one_pods_unreadable_bucket_is_one_warning_and_every_other_figure_stands(fleet_json: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    """vllm-bad-0's TTFT histogram has a bucket le="abc": the command still ends 0 (the fixture checks it), every
    pod's tokens are reported, that histogram's figures are n/a, and one warning names the pod and the metric."""
    report = fleet_json[1]
    by = pods(report)
    bad = by["vllm-bad-0"]["metrics"]
    assert bad["output_tokens_per_s"] == pytest.approx(300, rel=0.1) and bad["ttft"] is None
    assert by["vllm-0"]["metrics"]["output_tokens_per_s"] == pytest.approx(1000, rel=0.1)
    (line,) = [w for w in report["warnings"] if "serving pod" in w]
    assert line.startswith("serving pod serving/vllm-bad-0: vllm:time_to_first_token_seconds: ")
    assert 'le="abc" is not a number' in line and "its other figures are reported" in line
    assert bad["warnings"] == [line.removeprefix("serving pod serving/vllm-bad-0: ").removesuffix(
        "; its other figures are reported")]


def test_two_engines_one_restarting_are_each_counted_on_their_own(fleet_json: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    """vllm-dp-0: two engines of 500 tokens a second, engine 1 restarting mid-window (its counter from 0 after
    800 s of counting): 1,000 tokens a second, as the live scrape finds on the same server."""
    dp = pods(fleet_json[1])["vllm-dp-0"]["metrics"]
    assert dp["output_tokens_per_s"] == pytest.approx(1000, rel=0.15)
    assert dp["prompt_tokens_per_s"] == pytest.approx(3000, rel=0.15)


def test_a_mig_slice_and_a_shared_gpu_are_priced_at_their_part(fleet_json: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    by = pods(fleet_json[1])
    slice_usd_h = USD_PER_GPU_HOUR * 3 / H100_SLICES
    sglang = by["sglang-0"]["metrics"]
    assert by["sglang-0"]["mig_profiles"] == ["3g.40gb"]
    assert sglang["engine"] == "sglang" and sglang["usd_per_hour"] == pytest.approx(slice_usd_h)
    assert sglang["usd_per_million_output_tokens"] == pytest.approx(slice_usd_h / 3600 / 500 * 1e6, rel=0.1)
    tgi = by["tgi-0"]["metrics"]
    assert tgi["engine"] == "tgi" and tgi["usd_per_hour"] == pytest.approx(USD_PER_GPU_HOUR / 2)
    assert tgi["usd_per_million_output_tokens"] == pytest.approx(USD_PER_GPU_HOUR / 2 / 3600 / 200 * 1e6, rel=0.1)
    assert tgi["kv_cache_usage"] is None, "TGI exports no KV-cache use: unknown, not 0"
    assert by["vllm-kv-0"]["metrics"]["kv_cache_usage"] == pytest.approx(0.95), "the older gpu_cache_usage_perc"


def test_each_pod_gets_the_advice_its_metrics_call_for_with_its_dollars(fleet_json: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    report = fleet_json[1]
    by = pods(report)
    recs = {(r["code"], r["title"].split(":")[0]): r for r in report["recommendations"]
            if r["code"].startswith("serving_")}
    assert set(recs) == {("serving_overprovisioned", "serving/vllm-0"), ("serving_under_batched", "serving/sglang-0"),
                         ("serving_kv_bound", "serving/vllm-kv-0")}
    over = recs[("serving_overprovisioned", "serving/vllm-0")]
    assert "DCGM_FI_DEV_GPU_UTIL" in over["detail"] and "vllm:num_requests_waiting" in over["detail"]
    assert "vllm:kv_cache_usage_perc" in over["detail"]
    # busy 35% needs 0.35 / 0.6 of the GPU-hours at the 60% a slice is sized to: the rest of its cost is saved.
    assert over["est_saving_usd"] == pytest.approx(by["vllm-0"]["cost_usd"] * (1 - 0.35 / 0.6))
    under = recs[("serving_under_batched", "serving/sglang-0")]
    assert "sglang:num_queue_reqs" in under["detail"] and "--max-running-requests" in under["detail"]
    assert under["est_saving_usd"] == pytest.approx(by["sglang-0"]["cost_usd"] * 6 / (4 + 6))
    kv = recs[("serving_kv_bound", "serving/vllm-kv-0")]
    assert "vllm:gpu_cache_usage_perc" in kv["detail"] and "--kv-cache-dtype fp8" in kv["detail"]
    assert kv["est_saving_usd"] == pytest.approx(by["vllm-kv-0"]["cost_usd"] * 5 / (8 + 5))


def test_the_serving_pods_are_saved_and_analysed_again_from_the_store(fleet_json: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    home, report = fleet_json
    again = gpuscope("show", report["run_id"], "--json", "--reanalyze", "--usd-per-gpu-hour", "7.2", home=home)
    assert again.returncode == 0, again.stderr
    vllm = pods(json.loads(again.stdout))["vllm-0"]["metrics"]
    assert vllm["output_tokens_per_s"] == pods(report)["vllm-0"]["metrics"]["output_tokens_per_s"]
    assert vllm["usd_per_million_output_tokens"] == pytest.approx(
        2 * pods(report)["vllm-0"]["metrics"]["usd_per_million_output_tokens"])


def test_the_terminal_shows_each_pods_cost_per_million_tokens(serving_fleet: ServingFleet,
                                                               fleet_json: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    home, report = fleet_json
    text = gpuscope("show", report["run_id"], home=home)
    assert text.returncode == 0, text.stderr
    assert "Serving" in text.stdout and "serving/vllm-0" in text.stdout and "$/M out" in text.stdout
