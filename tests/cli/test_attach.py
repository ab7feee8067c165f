"""`gpuscope attach` end to end against real processes on this machine, and its faults."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import psutil
import pytest
from rich.console import Console
from typer.testing import CliRunner

from gpuscope.cli.live_view import LiveView
from gpuscope.cli.main import app
from gpuscope.collectors import stacks
from gpuscope.collectors.sampler import Tick
from gpuscope.collectors.stacks import StackBatch
from gpuscope.model import schema as m
from gpuscope.model.schema import PROC_ROLE, ROLE_CODES
from gpuscope.store import Store
from tests.as_nobody import AS_NOBODY, NobodyPython
from tests.cli.live_targets import SPIN, TRAIN, pyspy_cannot, started, tree, wait_for_workers
from tests.servers import serving

needs_pyspy = pytest.mark.skipif(pyspy_cannot() is not None, reason=str(pyspy_cannot()))
FAST = ("--interval", "0.2", "--stack-interval", "0.2")


def attach_json(pid: int, *args: str) -> tuple[dict[str, Any], str]:
    """`gpuscope attach PID --json` run in this process (the store is GPUSCOPE_HOME): report and stderr."""
    result = CliRunner().invoke(app, ["attach", str(pid), *FAST, "--json", *args])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout), result.stderr


@pytest.fixture(scope="module")
def loaders() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Both starved training loops, started together so their torch imports overlap; the CPU-bound
    one is paused until its test, so it does not take the cores from the other."""
    with ExitStack() as stack:
        procs = {mode: stack.enter_context(started(str(TRAIN), "--starve", mode, "--seconds", "120", workers=2,
                                                   wait=False)) for mode in ("io", "cpu")}
        for proc in procs.values():
            wait_for_workers(proc, 2)
        for p in tree(procs["cpu"]):
            p.suspend()
        yield procs


@needs_pyspy
def test_a_loader_starved_by_reads_is_data_loading_on_io(gpuscope_home: Path,
                                                         loaders: dict[str, subprocess.Popen[bytes]]) -> None:
    report, _ = attach_json(loaders["io"].pid, "--duration", "2")
    live = report["live"]
    assert live["host"]["workers"] == 2
    s = live["stacks"]
    assert s["main_dataloader_wait"] > 0.6  # the training loop waits on the loader
    assert s["workers_io"] > 0.6 and s["workers_io"] > s["workers_on_cpu"]  # workers block in __getitem__
    assert report["verdict"]["primary"] == "data_loading"
    assert report["verdict"]["resource"] == "io"
    assert report["run"]["kind"] == "attach" and report["run"]["status"] == "complete"


@needs_pyspy
def test_a_loader_starved_by_cpu_work_is_data_loading_on_cpu(gpuscope_home: Path,
                                                             loaders: dict[str, subprocess.Popen[bytes]]) -> None:
    for p in tree(loaders["cpu"]):
        p.resume()
    report, _ = attach_json(loaders["cpu"].pid, "--duration", "2")
    live = report["live"]
    s = live["stacks"]
    assert s["main_dataloader_wait"] > 0.6
    assert s["workers_on_cpu"] > 0.6 and s["workers_on_cpu"] > s["workers_io"]
    assert live["host"]["workers_cpu_mean"] > 2 * live["host"]["main_cpu_mean"]  # workers busy, main waits
    assert report["verdict"]["primary"] == "data_loading"
    assert report["verdict"]["resource"] == "cpu"


def test_attach_follows_the_target_until_it_exits(gpuscope_home: Path) -> None:
    with started(str(SPIN), "3") as target:  # ends by itself, a zombie until this test reaps it
        report, _ = attach_json(target.pid, "--no-stacks", "--interval", "0.1")
    assert report["run"]["status"] == "target_exited"
    assert report["live"]["host"]["main_cpu_mean"] is not None
    with Store(gpuscope_home) as store:
        (meta,) = store.list_runs()
        assert meta.status == "target_exited" and meta.kind == "attach" and meta.pid == target.pid
        assert store.load_report(meta.id) is not None


def test_no_such_pid_is_one_line(gpuscope_home: Path) -> None:
    result = CliRunner().invoke(app, ["attach", "4194000"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == "gpuscope: error: no process with pid 4194000\n"


@needs_pyspy
def test_a_process_that_is_not_python_gives_host_samples_only(gpuscope_home: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        report, stderr = attach_json(sleeper.pid, "--duration", "1")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert f"pid {sleeper.pid} is not a Python process" in stderr
    assert report["live"]["host"] is not None and report["live"]["stacks"] is None
    assert report["live"]["sources"] == ["host"]


class _Garbage(BaseHTTPRequestHandler):
    body = b"<html>this is not a metrics endpoint</html>"

    def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
        body = self.body
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


_A100_LABELS = 'UUID="GPU-{u}",device="nvidia{g}",modelName="NVIDIA A100-SXM4-80GB",Hostname="node1"'
TWO_A100S = "\n".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{g}",{_A100_LABELS.format(u=u, g=g)}}} {util}\n'
                      f'DCGM_FI_DEV_POWER_USAGE{{gpu="{g}",{_A100_LABELS.format(u=u, g=g)}}} {power}'
                      for g, u, util, power in ((0, "aaa", 10, 90.0), (1, "bbb", 90, 300.5))).encode() + b"\n"
"""A dcgm-exporter scrape of two A100s, in its own label dialect."""


class _TwoA100s(_Garbage):
    body = TWO_A100S


def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    with serving(HTTPServer(("127.0.0.1", 0), handler)) as server:
        yield f"127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def garbage_endpoint() -> Iterator[str]:
    yield from serve(_Garbage)


@pytest.fixture
def dcgm_endpoint() -> Iterator[str]:
    yield from serve(_TwoA100s)


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("which", ["garbage", "unreachable"])
def test_a_bad_dcgm_endpoint_asked_for_is_one_line_and_nothing_is_recorded(gpuscope_home: Path,
                                                                           garbage_endpoint: str, which: str) -> None:
    url = garbage_endpoint if which == "garbage" else _closed_port()
    with started(str(SPIN), "30") as target:
        result = CliRunner().invoke(app, ["attach", str(target.pid), "--duration", "1", "--no-stacks", "--dcgm", url])
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"gpuscope: error: DCGM endpoint http://{url}/metrics: ")
    assert line.endswith("; check --dcgm, or leave it out to record without DCGM")
    assert ("not Prometheus text" if which == "garbage" else "unreachable (Connection refused)") in line
    with Store(gpuscope_home) as store:
        assert store.list_runs() == []


def test_without_py_spy_it_says_how_to_get_it_and_goes_on(gpuscope_home: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stacks, "find_pyspy", lambda: None)
    with started(str(SPIN), "30") as target:
        result = CliRunner().invoke(app, ["attach", str(target.pid), "--duration", "0.5", "--interval", "0.1",
                                          "--json"])
    assert result.exit_code == 0, result.output
    assert "gpuscope[stacks]" in result.stderr
    report = json.loads(result.stdout)
    assert report["live"]["stacks"] is None and report["live"]["host"] is not None


def test_live_view_shows_gpus_host_and_the_current_stack() -> None:
    view = LiveView(title="gpuscope attach · pid 10", pid=10)
    rows = [(1, "nvml", 0, -1, m.GPU_UTIL, 0.42), (1, "nvml", 0, -1, m.GPU_MEMORY_USED_BYTES, 8 * 2**30),
            (1, "nvml", 0, -1, m.GPU_MEMORY_TOTAL_BYTES, 80 * 2**30), (1, "nvml", 0, -1, m.GPU_POWER_W, 250.0),
            (1, "host", -1, 10, m.PROC_CPU_CORES, 0.9), (1, "host", -1, 11, m.PROC_CPU_CORES, 1.5),
            (1, "host", -1, 11, PROC_ROLE, ROLE_CODES["loader_worker"]),
            (1, "host", -1, 12, PROC_ROLE, ROLE_CODES["helper"]),  # seen once: no CPU rate yet
            (1, "host", -1, -1, m.HOST_CPU, 0.6)]
    frames = ("<module> (train.py:80)", "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:725)")
    view.update(Tick(ts_ns=1, rows=rows, stacks=StackBatch(rows=[(1, 10, 10, "idle", 1)], stacks={1: frames})))
    console = Console(record=True, width=120)
    console.print(view)
    text = console.export_text()
    assert "42%" in text and "250 W" in text and "1 trainer 0.90 cores" in text and "1 worker 1.50 cores" in text
    assert "1 helper n/a" in text  # a CPU rate not known yet is n/a, not 0
    assert "_BaseDataLoaderIter.__next__" in text
    assert "n/a" in text  # SM active never reported: unknown, not 0


def test_attach_with_nvml_keeps_the_gpu_the_target_holds(gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # NVML mocked at the binding (autospec): two H100s, the target holds memory on the second only.
    from tests.collectors.nvml_fake import FakeGpu, FakeNvml

    with started(str(SPIN), "30") as target:
        FakeNvml([FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b", processes=[(target.pid, 2 * 2**30)])], monkeypatch)
        report, stderr = attach_json(target.pid, "--duration", "1", "--no-stacks")
    assert "no NVIDIA driver" not in stderr
    assert [g["index"] for g in report["run"]["gpus"]] == [1]  # the GPU the job used, not every GPU
    assert report["run"]["gpus"][0]["model"] == "NVIDIA H100 80GB HBM3"
    gpus = {g["gpu"]: g for g in report["live"]["gpus"]}
    assert set(gpus) == {1} and gpus[1]["util_mean"] == pytest.approx(0.87)  # GPU 0 is another job's
    assert gpus[1]["power_mean_w"] == pytest.approx(512.25)
    assert "nvml" in report["live"]["sources"] and "host" in report["live"]["sources"]
    assert report["cost"]["usd_per_gpu_hour"] is not None  # the catalog knows the H100


@needs_pyspy
def test_ptrace_refused_says_how_to_fix_it_and_goes_on(gpuscope_home: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       nobody_python: NobodyPython) -> None:
    # py-spy run as user nobody (a copy nobody may run): the kernel refuses it root's process, as it would another
    # user's.
    wrapper = tmp_path / "py-spy-as-nobody"
    wrapper.write_text(f'#!/bin/sh\nexec {" ".join(AS_NOBODY)} env {nobody_python.pyspy} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(stacks, "find_pyspy", lambda: str(wrapper))
    with started(str(SPIN), "30") as target:
        report, stderr = attach_json(target.pid, "--duration", "0.5")
    (line,) = [ln for ln in stderr.splitlines() if "ptrace" in ln]
    assert "CAP_SYS_PTRACE" in line and "kernel.yama.ptrace_scope" in line
    assert "as the target's user or as root" in line
    assert report["live"]["stacks"] is None and report["live"]["host"] is not None


def test_without_nvml_the_gpus_come_from_dcgm_and_the_targets_visible_devices(gpuscope_home: Path,
                                                                             dcgm_endpoint: str) -> None:
    target = subprocess.Popen([sys.executable, str(SPIN), "30"], stdout=subprocess.DEVNULL,
                              env={**os.environ, "CUDA_VISIBLE_DEVICES": "1"})
    try:
        report, stderr = attach_json(target.pid, "--duration", "1", "--no-stacks", "--dcgm", dcgm_endpoint)
    finally:
        target.kill()
        target.wait()
    assert "DCGM" not in stderr
    assert report["run"]["gpus"] == [{"model": "NVIDIA A100-SXM4-80GB", "memory_bytes": None, "index": 1,
                                      "mig_profile": None}]
    (gpu,) = report["live"]["gpus"]
    assert gpu["gpu"] == 1 and gpu["util_mean"] == pytest.approx(0.9) and gpu["power_mean_w"] == pytest.approx(300.5)
    assert "dcgm" in report["live"]["sources"]


def test_attach_takes_the_analysis_options_of_analyze(gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.collectors.nvml_fake import FakeGpu, FakeNvml

    with started(str(SPIN), "30") as target:
        FakeNvml([FakeGpu(uuid="GPU-a", processes=[(target.pid, 2 * 2**30)])], monkeypatch)
        report, stderr = attach_json(target.pid, "--duration", "0.5", "--no-stacks", "--usd-per-gpu-hour", "2",
                                     "--job-hours", "10", "--no-save")
    assert report["cost"]["projected_usd"] == pytest.approx(10 * 2.0)  # one GPU for the whole 10 h job
    assert "saved as run" not in stderr
    with Store(gpuscope_home) as store:
        assert store.list_runs() == []  # --no-save: nothing left in the store


PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, sys.argv[1], "30"], stdout=subprocess.DEVNULL)
print(child.pid, flush=True)
time.sleep(30)
"""


def test_the_process_holding_the_gpu_trains_and_its_parent_only_launches(
        gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A Python wrapper that starts the real job: NVML lists the child on GPU 1, not the wrapper.
    from tests.collectors.nvml_fake import FakeGpu, FakeNvml

    wrapper = subprocess.Popen([sys.executable, "-c", PARENT, str(SPIN)], stdout=subprocess.PIPE, text=True)
    try:
        assert wrapper.stdout is not None
        child = int(wrapper.stdout.readline())
        FakeNvml([FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b", processes=[(child, 2 * 2**30)])], monkeypatch)
        report, _ = attach_json(wrapper.pid, "--duration", "1", "--no-stacks")
    finally:
        psutil.Process(child).kill()
        wrapper.kill()
        wrapper.wait()
    roles = {p["pid"]: (p["role"], p["gpu"]) for p in report["live"]["processes"]}
    assert roles == {wrapper.pid: ("launcher", None), child: ("trainer", 1)}
    assert [g["gpu"] for g in report["live"]["gpus"]] == [1]
