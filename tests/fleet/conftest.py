"""A real Prometheus (Debian's `prometheus` binary) on loopback, scraping two replayed dcgm-exporter endpoints.

node-a serves a training job's two pods (one of whose GPUs appears only after a while); node-b serves an
inference service's two pods, one of them holding an idle GPU that vanishes before the end, plus a GPU no pod
holds. node-b is scraped the way Prometheus' Kubernetes discovery labels an exporter pod, so the workload's
labels arrive as exported_pod / exported_namespace. One Prometheus for all the fleet tests; scrape_interval 1 s.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fleet.exporters import Exporter, ReplayedGpu

SCRAPE_S = 1.0
STEP_S = 2.0
BUCKETS = 7
"""The test window: 7 buckets of 2 s, ending a little before the samples do."""


@dataclass(frozen=True)
class FleetUnderTest:
    url: str
    exporters: tuple[Exporter, ...]
    start_s: float
    end_s: float

    def gpu(self, pod: str) -> ReplayedGpu:
        return next(g for e in self.exporters for g in e.gpus if g.pod == pod)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _prometheus_binary() -> str | None:
    return shutil.which("prometheus") or next(
        (p for p in ("/usr/bin/prometheus", "/usr/local/bin/prometheus") if Path(p).exists()), None)


def _config(exporters: tuple[Exporter, ...]) -> str:
    node_a, node_b = exporters
    return json.dumps({  # JSON is YAML
        "global": {"scrape_interval": f"{SCRAPE_S:g}s", "evaluation_interval": f"{SCRAPE_S:g}s"},
        "scrape_configs": [{"job_name": "dcgm-exporter", "static_configs": [
            {"targets": [f"127.0.0.1:{node_a.port}"]},
            {"targets": [f"127.0.0.1:{node_b.port}"],
             "labels": {"pod": "nvidia-dcgm-exporter-x7k2p", "namespace": "gpu-operator"}},
        ]}],
    })


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _scraped(url: str) -> bool:
    """Both endpoints have been scraped at least once."""
    query = urllib.parse.urlencode({"query": "count(count by (instance) (DCGM_FI_DEV_GPU_UTIL))"})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=1) as response:
            result = json.load(response)["data"]["result"]
    except OSError:
        return False
    return bool(result) and result[0]["value"][1] == "2"


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetUnderTest]:
    binary = _prometheus_binary()
    if binary is None:
        pytest.skip("the Prometheus binary is not installed (Debian: apt-get install prometheus; scripts/test does)")
    exporters = (
        Exporter("node-a", [
            ReplayedGpu(0, pod="train-llama-0", namespace="ml", util_pct=(90, 100, 80), fb_used_mib=14000),
            ReplayedGpu(1, pod="train-llama-1", namespace="ml", util_pct=(70, 90), fb_used_mib=13000,
                        present_from_s=5.0),
        ]),
        Exporter("node-b", [
            ReplayedGpu(0, pod="serve-sd-7d9c8b6f5-x2x4k", namespace="inference", util_pct=(10, 20, 30),
                        fb_used_mib=6000),
            ReplayedGpu(1, pod="serve-sd-7d9c8b6f5-q9z8w", namespace="inference", util_pct=(0,),
                        fb_used_mib=5000, present_until_s=9.0),
            ReplayedGpu(2, util_pct=(0,), fb_used_mib=0),
        ]),
    )
    folder = tmp_path_factory.mktemp("prometheus")
    (folder / "prometheus.yml").write_text(_config(exporters))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [binary, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
        stdout=subprocess.DEVNULL, stderr=(folder / "prometheus.log").open("w"))
    try:
        deadline = time.monotonic() + 30
        while not _ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Prometheus did not start: {(folder / 'prometheus.log').read_text()[-2000:]}")
            time.sleep(0.2)
        while not _scraped(url):
            if time.monotonic() > deadline:
                pytest.fail("Prometheus did not scrape the replayed exporters within 30 s")
            time.sleep(0.2)
        # The window starts after both endpoints' first scrapes and ends a step before the last, so each bucket
        # is whole.
        start_s = time.time() + SCRAPE_S
        for exporter in exporters:
            exporter.window_start_s = start_s
        end_s = start_s + BUCKETS * STEP_S
        time.sleep(max(0.0, end_s + STEP_S - time.time()))
        yield FleetUnderTest(url=url, exporters=exporters, start_s=start_s, end_s=end_s)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        for exporter in exporters:
            exporter.close()
