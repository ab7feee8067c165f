"""Real Prometheus servers (Debian's `prometheus` binary) on loopback, scraping replayed dcgm-exporter endpoints.

The T4 fleet: node-a serves a training job's two pods (one of whose GPUs appears only after a while); node-b serves
an inference service's two pods, one of them holding an idle GPU that vanishes before the end, plus a GPU no pod
holds. node-b is scraped the way Prometheus' Kubernetes discovery labels an exporter pod, so the workload's labels
arrive as exported_pod / exported_namespace.

The H100 fleet (its own Prometheus, so the T4 fleet's figures stay its own): node-c has a whole H100 held by one pod
(serving DCGM's profiling fields too, as does one time-sliced pod),
an H100 split into MIG instances (1g.10gb, 3g.40gb, another 1g.10gb no pod holds) served in the real MIG scrape's
label dialect, and two time-sliced H100s each reported for two pods: one with a per-pod SM utilisation series for
each pod, one without. Both servers start together and share one wait; scrape_interval 1 s.
"""

from __future__ import annotations

import json
import os
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


REQUIRE_ENV = "GPUSCOPE_REQUIRE_PROMETHEUS"
"""CI sets it: a fleet test without its Prometheus fails there instead of skipping."""


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


def _config(exporters: tuple[Exporter, ...], relabelled: tuple[Exporter, ...] = ()) -> str:
    """Scrape each exporter; the ``relabelled`` ones as Kubernetes discovery labels an exporter pod."""
    return json.dumps({  # JSON is YAML
        "global": {"scrape_interval": f"{SCRAPE_S:g}s", "evaluation_interval": f"{SCRAPE_S:g}s"},
        "scrape_configs": [{"job_name": "dcgm-exporter", "static_configs": [
            {"targets": [f"127.0.0.1:{e.port}"]} if e not in relabelled else
            {"targets": [f"127.0.0.1:{e.port}"], "labels": {"pod": "nvidia-dcgm-exporter-x7k2p",
                                                             "namespace": "gpu-operator"}}
            for e in exporters]}],
    })


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _scraped(url: str, endpoints: int) -> bool:
    """Every endpoint has been scraped at least once."""
    query = urllib.parse.urlencode({"query": 'count(count by (instance) '
                                             '({__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_PROF_GR_ENGINE_ACTIVE"}))'})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=1) as response:
            result = json.load(response)["data"]["result"]
    except OSError:
        return False
    return bool(result) and result[0]["value"][1] == str(endpoints)


def t4_fleet() -> tuple[Exporter, ...]:
    return (
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


H100 = "NVIDIA H100 80GB HBM3"
WHOLE_0_PROF = {"DCGM_FI_PROF_SM_ACTIVE": 0.85, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.03,
                "DCGM_FI_PROF_SM_OCCUPANCY": 0.4, "DCGM_FI_PROF_DRAM_ACTIVE": 0.25}
"""whole-0's SMs are busy while its tensor pipes are nearly idle (fp32 matrix work on CUDA cores)."""
TENANT_A_PROF = {"DCGM_FI_PROF_SM_ACTIVE": 0.7, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.45}
"""tenant-a's tensor pipes carry most of its SM time; it gives no occupancy or DRAM field."""


def h100_fleet() -> tuple[Exporter, ...]:
    return (Exporter("node-c", [
        ReplayedGpu(0, pod="whole-0", namespace="ml", model=H100, util_pct=(60, 80), fb_used_mib=30000,
                    prof=WHOLE_0_PROF),
        ReplayedGpu(1, pod="slice-small", namespace="ml", mig=("1g.10gb", 9), util_pct=(20, 40)),
        ReplayedGpu(1, pod="slice-mid", namespace="ml", mig=("3g.40gb", 2), util_pct=(50, 70)),
        ReplayedGpu(1, mig=("1g.10gb", 10), util_pct=(0,)),
        ReplayedGpu(2, pod="tenant-a", namespace="inference", model=H100, util_pct=(80, 90), fb_used_mib=20000,
                    prof=TENANT_A_PROF),
        ReplayedGpu(2, pod="tenant-b", namespace="inference", model=H100, util_pct=(80, 90), fb_used_mib=20000),
        ReplayedGpu(3, pod="tenant-c", namespace="inference", model=H100, util_pct=(80, 90), fb_used_mib=20000,
                    pod_sm_pct=(60, 70)),
        ReplayedGpu(3, pod="tenant-d", namespace="inference", model=H100, util_pct=(80, 90), fb_used_mib=20000,
                    pod_sm_pct=(20, 20)),
    ]),)


@dataclass
class _Server:
    exporters: tuple[Exporter, ...]
    folder: Path
    url: str
    proc: subprocess.Popen[bytes]


def _start(binary: str, folder: Path, exporters: tuple[Exporter, ...], relabelled: tuple[Exporter, ...]) -> _Server:
    (folder / "prometheus.yml").write_text(_config(exporters, relabelled))
    port = _free_port()
    with (folder / "prometheus.log").open("w") as log:  # the child writes its own copy of the handle
        proc = subprocess.Popen(
            [binary, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
            stdout=subprocess.DEVNULL, stderr=log)
    return _Server(exporters, folder, f"http://127.0.0.1:{port}", proc)


def _wait(server: _Server, deadline: float) -> None:
    while not _ready(server.url):
        if server.proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"Prometheus did not start: {(server.folder / 'prometheus.log').read_text()[-2000:]}")
        time.sleep(0.2)
    while not _scraped(server.url, len(server.exporters)):
        if time.monotonic() > deadline:
            pytest.fail("Prometheus did not scrape the replayed exporters within 30 s")
        time.sleep(0.2)


@pytest.fixture(scope="session")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, FleetUnderTest]]:
    binary = _prometheus_binary()
    if binary is None:
        why = ("the Prometheus binary is not installed (Debian: apt-get install prometheus; "
               "GPUSCOPE_INSTALL_SYSTEM=1 scripts/test installs it)")
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{why}; {REQUIRE_ENV}=1 makes a fleet test that cannot run a failure", pytrace=False)
        pytest.skip(why)
    t4, h100 = t4_fleet(), h100_fleet()
    servers: dict[str, _Server] = {}
    try:
        servers["t4"] = _start(binary, tmp_path_factory.mktemp("prometheus"), t4, relabelled=(t4[1],))
        servers["h100"] = _start(binary, tmp_path_factory.mktemp("prometheus-h100"), h100, relabelled=())
        deadline = time.monotonic() + 30
        for server in servers.values():
            _wait(server, deadline)
        # The window starts after every endpoint's first scrape and ends a step before the last, so each bucket
        # is whole.
        start_s = time.time() + SCRAPE_S
        for exporter in t4 + h100:
            exporter.window_start_s = start_s
        end_s = start_s + BUCKETS * STEP_S
        time.sleep(max(0.0, end_s + STEP_S - time.time()))
        yield {name: FleetUnderTest(url=server.url, exporters=server.exporters, start_s=start_s, end_s=end_s)
               for name, server in servers.items()}
    finally:
        for server in servers.values():
            server.proc.terminate()
            try:
                server.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.proc.kill()
        for exporter in t4 + h100:
            exporter.close()


@pytest.fixture(scope="session")
def prometheus(fleets: dict[str, FleetUnderTest]) -> FleetUnderTest:
    """The T4 fleet."""
    return fleets["t4"]


@pytest.fixture(scope="session")
def h100_prometheus(fleets: dict[str, FleetUnderTest]) -> FleetUnderTest:
    """The H100 fleet: whole GPUs, MIG instances, time-sliced GPUs."""
    return fleets["h100"]
