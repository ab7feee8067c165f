"""A real Prometheus (Debian's `prometheus` binary) on loopback scraping one H100 node's replayed dcgm-exporter and
four inference servers' metrics endpoints, each labelled with its Kubernetes pod as service discovery labels it:

- vllm-0: a whole H100 at 35% busy; vLLM generating 1,000 tokens a second and reading 4,000, 3 requests running, none
  waiting, KV cache 20% used (over-provisioned);
- sglang-0: a MIG 3g.40gb slice of another H100 at 60%; SGLang at 500 tokens a second, 4 running, 6 waiting, KV cache
  30% used (under-batched);
- tgi-0 and vllm-kv-0: one H100 time-sliced between them at 80%; TGI at 200 tokens a second (no KV-cache metric),
  and vLLM under its older names with its KV cache 95% full and 5 requests waiting (KV-bound);
- vllm-dp-0 (no GPU series): vLLM of two data-parallel engines of 500 tokens a second each, counting for 800 s
  already, engine 1 restarting in the middle of the window;
- vllm-bad-0 (no GPU series): vLLM at 300 tokens a second whose TTFT histogram has a bucket ``le="abc"``.

Scrape interval 1 s (the replayed exporter grows its energy counter by one second of power a scrape); the window is
three buckets of 2 s after every target's first scrape.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.fleet.conftest import H100, REQUIRE_ENV, _free_port, _prometheus_binary, _ready
from tests.fleet.exporters import Exporter, ReplayedGpu
from tests.serving.endpoints import SGLANG, TGI, VLLM, VLLM_OLD, DataParallel, Endpoint, Engine

SCRAPE_S = 1.0
STEP_S = 2.0
BUCKETS = 3
NAMESPACE = "serving"


@dataclass(frozen=True)
class ServingFleet:
    url: str
    exporter: Exporter
    endpoints: dict[str, Endpoint]
    start_s: float
    end_s: float

    def window_args(self) -> list[str]:
        return ["--prometheus", self.url, "--start", f"{self.start_s:.3f}", "--end", f"{self.end_s:.3f}",
                "--step", f"{STEP_S:g}s"]


def serving_gpus() -> list[ReplayedGpu]:
    return [ReplayedGpu(0, pod="vllm-0", namespace=NAMESPACE, model=H100, util_pct=(35,), fb_used_mib=70000),
            ReplayedGpu(1, pod="sglang-0", namespace=NAMESPACE, mig=("3g.40gb", 2), util_pct=(60,)),
            ReplayedGpu(2, pod="tgi-0", namespace=NAMESPACE, model=H100, util_pct=(80,), fb_used_mib=60000),
            ReplayedGpu(2, pod="vllm-kv-0", namespace=NAMESPACE, model=H100, util_pct=(80,), fb_used_mib=60000)]


def serving_engines() -> dict[str, Engine]:
    return {"vllm-0": Engine(VLLM, output_per_s=1000, prompt_per_s=4000, running=3, waiting=0, kv=0.2),
            "sglang-0": Engine(SGLANG, output_per_s=500, prompt_per_s=1500, running=4, waiting=6, kv=0.3),
            "tgi-0": Engine(TGI, output_per_s=200, prompt_per_s=600, running=2, waiting=0),
            "vllm-kv-0": Engine(VLLM_OLD, output_per_s=800, prompt_per_s=2000, running=8, waiting=5, kv=0.95),
            "vllm-bad-0": Engine(VLLM, output_per_s=300, prompt_per_s=900, running=1, waiting=0, kv=0.1,
                                 bad_bucket=True)}


def _config(exporter: Exporter, endpoints: dict[str, Endpoint]) -> str:
    return json.dumps({
        "global": {"scrape_interval": f"{SCRAPE_S:g}s", "evaluation_interval": f"{SCRAPE_S:g}s"},
        "scrape_configs": [
            {"job_name": "dcgm-exporter", "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]},
            {"job_name": "inference", "static_configs": [
                {"targets": [f"127.0.0.1:{e.port}"], "labels": {"pod": pod, "namespace": NAMESPACE}}
                for pod, e in endpoints.items()]},
        ]})


def _all_up(url: str, targets: int) -> bool:
    query = urllib.parse.urlencode({"query": "count(up == 1)"})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=1) as response:
            result = json.load(response)["data"]["result"]
    except OSError:
        return False
    return bool(result) and result[0]["value"][1] == str(targets)


@pytest.fixture(scope="session")
def serving_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServingFleet]:
    binary = _prometheus_binary()
    if binary is None:
        why = "the Prometheus binary is not installed (Debian: apt-get install prometheus)"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{why}; {REQUIRE_ENV}=1 makes a fleet test that cannot run a failure", pytrace=False)
        pytest.skip(why)
    folder = tmp_path_factory.mktemp("prometheus-serving")
    exporter = Exporter("node-s", serving_gpus())
    endpoints = {pod: Endpoint(engine) for pod, engine in serving_engines().items()}
    restarting = DataParallel(per_engine_per_s=500, restart_after_s=1e9)
    endpoints["vllm-dp-0"] = Endpoint(restarting)
    (folder / "prometheus.yml").write_text(_config(exporter, endpoints))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with (folder / "prometheus.log").open("w") as log:
        proc = subprocess.Popen(
            [binary, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
            stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while not (_ready(url) and _all_up(url, 1 + len(endpoints))):
            if proc.poll() is not None or time.monotonic() > deadline:
                log_tail = (folder / "prometheus.log").read_text()[-2000:]
                pytest.fail(f"Prometheus did not start and scrape: {log_tail}")
            time.sleep(0.2)
        start_s = time.time() + SCRAPE_S
        restarting.restart_at = start_s + BUCKETS * STEP_S / 2
        exporter.window_start_s = start_s
        end_s = start_s + BUCKETS * STEP_S
        time.sleep(max(0.0, end_s + STEP_S - time.time()))
        yield ServingFleet(url=url, exporter=exporter, endpoints=endpoints, start_s=start_s, end_s=end_s)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        exporter.close()
        for e in endpoints.values():
            e.close()
