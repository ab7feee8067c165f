"""`gpuscope top` against NVML mocked at the binding, answering as an NVIDIA H200 did with two processes on it
(sample_traces/h200/live/tenants.json, replayed by tests/collectors/tenants.py), for two real processes."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuscope.cli import top as top_module
from gpuscope.cli.main import app
from tests.collectors.nvml_fake import FakeNvml, pynvml
from tests.collectors.tenants import TenantReplay, h200, recorded

PRICE = 4.0


@dataclass(frozen=True)
class Tenants:
    heavy: subprocess.Popen[bytes]
    light: subprocess.Popen[bytes]


def sleeper(*words: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *words])


@pytest.fixture
def tenants() -> Iterator[Tenants]:
    pair = Tenants(heavy=sleeper("heavy-bf16-matmul"), light=sleeper("light-sleepy-loop"))
    yield pair
    for proc in (pair.heavy, pair.light):
        proc.kill()
        proc.wait()


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tenants: Tenants, tmp_path: Path) -> FakeNvml:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path))
    gpu = h200()
    fake = FakeNvml([gpu], monkeypatch)
    TenantReplay(gpu, {"heavy": tenants.heavy.pid, "light": tenants.light.pid})
    return fake


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["top", *args])
    return result.exit_code, result.output


def second_tick() -> tuple[dict[str, int], dict[str, int], int]:
    """What the H200 answered on the second tick where both ran (the frame --once shows): memory and SM % by
    role, and the device's utilization %."""
    roles, ticks = recorded()
    both = [t for i, t in enumerate(ticks) if {p for p, _ in t.processes} == set(roles.values()) and i > 0]
    tick = both[1]
    by_pid = {pid: role for role, pid in roles.items()}
    memory = {by_pid[pid]: used for pid, used in tick.processes}
    sm = {role: 0 for role in roles}  # a process with a context but no sample in a fresh answer used under 1%
    for pid, _ts, pct, _mem in tick.samples or ():
        sm[by_pid[pid]] = pct
    return memory, sm, tick.gpu_util_pct


def test_top_once_json_shows_both_processes_with_their_cost(machine: FakeNvml, tenants: Tenants) -> None:
    code, out = invoke("--json", "--interval", "0.05", "--usd-per-gpu-hour", str(PRICE))
    assert code == 0, out
    doc = json.loads(out)
    memory, sm, util = second_tick()
    (gpu,) = doc["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["util"] == util / 100 and gpu["usd_per_hour"] == PRICE
    assert gpu["usd"] > 0 and doc["total_usd"] == gpu["usd"]
    procs = {p["pid"]: p for p in doc["processes"]}
    assert set(procs) == {tenants.heavy.pid, tenants.light.pid}
    me = pwd.getpwuid(os.getuid()).pw_name
    for role, proc in (("heavy", tenants.heavy), ("light", tenants.light)):
        got = procs[proc.pid]
        assert got["user"] == me and f"{role}-" in got["command"]
        assert got["memory_bytes"] == memory[role] and got["sm_share"] == sm[role] / 100
        # Its part of the GPU: its SM share over both processes' (the rule of every shared-GPU view).
        assert got["usd_per_hour"] == pytest.approx(PRICE * sm[role] / sum(sm.values()))
        assert got["usd"] == pytest.approx(got["usd_per_hour"] * (doc["ts_ns"] - doc["since_ns"]) / 3.6e12)
    assert sum(p["usd_per_hour"] for p in procs.values()) == pytest.approx(PRICE)


def test_top_once_terminal_frame(machine: FakeNvml, tenants: Tenants) -> None:
    code, out = invoke("--once", "--interval", "0.05", "--usd-per-gpu-hour", str(PRICE))
    assert code == 0, out
    assert "NVIDIA H200" in out and "$4.00" in out and "cost so far" in out
    for proc in (tenants.heavy, tenants.light):
        assert str(proc.pid) in out
    assert "heavy-bf16-matmul" in out and "light-sleepy-loop" in out
    assert "21.0 GiB" in out and "6.6 GiB" in out  # 22,525,509,632 and 7,132,413,952 bytes, as NVML gave them


def test_top_prices_from_the_catalog_by_default(machine: FakeNvml) -> None:
    doc = json.loads(invoke("--json", "--interval", "0.05")[1])
    catalog = json.loads((Path(top_module.__file__).parents[1] / "data" / "prices.json").read_text())
    h200 = [e for e in catalog["gpus"] if e["model"] == "H200"]
    assert h200 and doc["gpus"][0]["usd_per_hour"] == h200[0]["usd_per_gpu_hour"]
    assert "catalog" in doc["gpus"][0]["price_source"]


def test_live_refreshes_until_interrupted(machine: FakeNvml, tenants: Tenants, monkeypatch: pytest.MonkeyPatch) -> None:
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 3:
            raise KeyboardInterrupt  # Ctrl-C after three frames

    monkeypatch.setattr(top_module.time, "sleep", sleep)
    code, out = invoke("--interval", "0.5", "--usd-per-gpu-hour", str(PRICE))
    assert code == 0 and naps == [0.5, 0.5, 0.5]
    assert str(tenants.heavy.pid) in out and "cost so far" in out
    assert machine.calls("nvmlDeviceGetUtilizationRates") == 3


def test_no_driver_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path))
    fake = FakeNvml([h200()], monkeypatch)
    fake.init_error = pynvml.NVMLError_DriverNotLoaded
    result = CliRunner().invoke(app, ["top", "--once"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "gpuscope: error: top needs an NVIDIA GPU and its driver: no NVIDIA driver found"]


def test_command_lines_reach_the_terminal_as_text(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path))
    evil = sleeper("evil\x1b[2J\x1b]0;owned\x07[bold red]x[/bold red]")
    try:
        gpu = h200()
        FakeNvml([gpu], monkeypatch)
        gpu.processes = [(evil.pid, 2**30)]
        code, out = invoke("--once", "--interval", "0.05")
    finally:
        evil.kill()
        evil.wait()
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    squeezed = "".join(out.split())  # the command column folds long lines
    assert "evil\\x1b[2J\\x1b]0;owned\\x07[boldred]x[/boldred]" in squeezed
