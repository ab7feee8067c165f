"""`gpuscope run --serving-metrics URL` as a user runs it: a real subprocess scraping a serving endpoint whose
counters grow at known rates, beside a replayed dcgm-exporter H100; the report prices the server's tokens at the
run's own GPU cost. Bad endpoints end in one line before anything is launched."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.fleet.conftest import H100
from tests.fleet.exporters import Exporter, ReplayedGpu
from tests.serving.endpoints import SGLANG, TTFT_P50_S, TTFT_P99_S, DataParallel, Endpoint, Engine

SLEEP = [sys.executable, "-c", "import time; time.sleep(3)"]


@pytest.fixture(scope="module")
def dcgm() -> Iterator[Exporter]:
    exporter = Exporter("node-l", [ReplayedGpu(0, model=H100, util_pct=(35,))])
    yield exporter
    exporter.close()


@pytest.fixture(scope="module")
def recorded(dcgm: Exporter, tmp_path_factory: pytest.TempPathFactory) -> dict:  # type: ignore[type-arg]
    server = Endpoint(Engine(SGLANG, output_per_s=1000, prompt_per_s=3000, running=16, waiting=0, kv=0.4))
    try:
        result = gpuscope("run", "--serving-metrics", f"127.0.0.1:{server.port}", "--dcgm", f"127.0.0.1:{dcgm.port}",
                          "--usd-per-gpu-hour", "3.6", "--no-stacks", "--interval", "0.25", "--json", "--", *SLEEP,
                          home=tmp_path_factory.mktemp("home"))
    finally:
        server.close()
    assert result.returncode == 0, result.stderr
    report: dict = json.loads(result.stdout)  # type: ignore[type-arg]
    return report


def test_the_servers_tokens_are_priced_at_the_runs_gpu_cost(recorded: dict) -> None:  # type: ignore[type-arg]
    serving = recorded["serving"]
    m = serving["metrics"]
    assert serving["source"].startswith("http://127.0.0.1:") and serving["source"].endswith("/metrics")
    assert m["engine"] == "sglang"
    assert m["output_tokens_per_s"] == pytest.approx(1000, rel=0.1)
    assert m["prompt_tokens_per_s"] == pytest.approx(3000, rel=0.1)
    # one H100 at $3.60 an hour: $0.001 a second over 1,000 tokens a second is $1.00 a million
    assert m["usd_per_million_output_tokens"] == pytest.approx(1.0, rel=0.1)
    assert m["usd_per_million_tokens"] == pytest.approx(0.25, rel=0.1)
    assert (m["requests_running"], m["requests_waiting"], m["kv_cache_usage"]) == (16, 0, pytest.approx(0.4))
    assert m["ttft"]["p50_s"] == pytest.approx(TTFT_P50_S) and m["ttft"]["p99_s"] == pytest.approx(TTFT_P99_S)
    assert m["gpu_busy"] == pytest.approx(0.35)


def test_an_idle_server_is_told_to_shrink_naming_its_metrics(recorded: dict) -> None:  # type: ignore[type-arg]
    (rec,) = [r for r in recorded["recommendations"] if r["code"] == "serving_overprovisioned"]
    assert "sglang:num_queue_reqs" in rec["detail"] and "sglang:token_usage" in rec["detail"]
    assert rec["est_saving_usd"] == pytest.approx(recorded["cost"]["total_usd"] * (1 - 0.35 / 0.6))


def test_two_engines_one_restarting_and_a_missed_scrape_give_the_servers_own_rate(tmp_path: Path) -> None:
    """Two data-parallel engines of 500 tokens a second, counting for 800 s already; engine 1 restarts 4 s in and
    one scrape 2 s in answers 503. Each engine's increase is its own (the restart counted from 0, the missed scrape
    a longer interval): 1,000 tokens a second, not the other engine's total counted again. Its latency histograms
    are broken (a bound of -1 s and buckets out of order; a bound "abc"): their figures are n/a, with a warning
    naming each metric, never a negative latency."""
    server = Endpoint(DataParallel(per_engine_per_s=500, restart_after_s=4, miss_after_s=2, broken=True))
    try:
        result = gpuscope("run", "--serving-metrics", f"127.0.0.1:{server.port}", "--no-stacks", "--interval",
                          "0.25", "--json", "--", sys.executable, "-c", "import time; time.sleep(6)",
                          home=tmp_path / "home")
    finally:
        server.close()
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    m = report["serving"]["metrics"]
    assert m["output_tokens_per_s"] == pytest.approx(1000, rel=0.15)
    assert m["prompt_tokens_per_s"] == pytest.approx(3000, rel=0.15)
    assert m["ttft"] is None and m["e2e_latency"] is None, "a broken histogram has no figures"
    warnings = report["warnings"]
    (ttft,) = [w for w in warnings if "vllm:time_to_first_token_seconds" in w]
    assert 'le="-1' in ttft and "n/a" in ttft and "below 0" in ttft
    (e2e,) = [w for w in warnings if "vllm:e2e_request_latency_seconds" in w]
    assert 'le="abc"' in e2e and "the rest is reported" in e2e
    (gap,) = [w for w in warnings if "gave nothing" in w]
    assert gap.startswith(f"serving metrics at http://127.0.0.1:{server.port}/metrics: 1 scrape gave nothing")


@pytest.mark.parametrize("body", [None, b"<html>hello</html>", b"process_cpu_seconds_total 3\n"])
def test_a_bad_serving_endpoint_is_one_line_and_nothing_runs(tmp_path: Path, body: bytes | None) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.servers import serving as running

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    marker = tmp_path / "ran"
    with running(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as server:
        port = server.server_address[1] if body is not None else _closed_port()
        result = gpuscope("run", "--serving-metrics", f"127.0.0.1:{port}", "--no-stacks", "--",
                          sys.executable, "-c", f"open({str(marker)!r}, 'w')", home=tmp_path / "home")
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert line.startswith(f"gpuscope: error: serving metrics endpoint http://127.0.0.1:{port}/metrics: ")
    assert line.endswith("check --serving-metrics")
    assert not marker.exists(), "the command was not launched"


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
