"""A live run on a shared GPU, NVML mocked at the binding replaying a real H200 shared by two processes: the
target's own share and its cost beside the GPU's, in the terminal, the JSON and the dashboard."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuscope.cli.main import app
from gpuscope.dashboards.app import route
from gpuscope.dashboards.data import RunReader
from gpuscope.format import usd as fmt_usd
from gpuscope.reports.html import ReportDocument, render_html
from gpuscope.store import Store
from tests.cli.live_targets import SPIN, started
from tests.collectors.nvml_fake import FakeGpu, FakeNvml, mig_instance, pynvml
from tests.collectors.tenants import TenantReplay, h200, recorded

NEIGHBOUR = 4_000_000  # the busy process: NVML lists it, this machine has no such pid
H200_USD = 10.6  # the catalog's H200 price (gpuscope/data/prices.json)


def _text(component: object) -> str:
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list | tuple):
        return " ".join(_text(c) for c in component)
    children = getattr(component, "children", None)
    return "" if children is None else _text(children)


def reference_parts(ticks: int) -> tuple[list[float], list[float], list[float], list[float]]:
    """From the recording alone: the light process's SM share, the busy one's, the light one's part of the cost
    (its use over both, else half) and the GPU's utilization at each of the first ``ticks`` replayed ticks."""
    roles, recorded_ticks = recorded()
    both = [t for i, t in enumerate(recorded_ticks)
            if i > 0 and {p for p, _ in t.processes} == {roles["light"], roles["heavy"]}]
    own, others, parts, busy = [], [], [], []
    for j in range(ticks):
        busy.append(both[j % len(both)].gpu_util_pct / 100)
        samples = both[j % len(both)].samples
        assert samples is not None
        sm = {p: s / 100 for p, _ts, s, _mem in samples}
        mine, theirs = sm.get(roles["light"], 0.0), sm.get(roles["heavy"], 0.0)
        own.append(mine)
        others.append(theirs)
        parts.append(mine / (mine + theirs) if mine + theirs > 0 else 0.5)
    return own, others, parts, busy


@pytest.fixture
def shared_run(gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[dict[str, Any], str, int]]:
    """`gpuscope attach` (JSON) to a process NVML shows beside a busy one, then `gpuscope show` (terminal)."""
    with started(str(SPIN), "60") as target:
        gpu = h200()
        FakeNvml([gpu], monkeypatch)
        TenantReplay(gpu, {"light": target.pid, "heavy": NEIGHBOUR})
        result = CliRunner().invoke(app, ["attach", str(target.pid), "--duration", "2", "--interval", "0.2",
                                          "--no-stacks", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    shown = CliRunner().invoke(app, ["show", report["run"]["id"]], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    yield report, shown.stdout, target.pid


def test_the_json_has_the_targets_own_share_and_cost_beside_the_gpus(shared_run: tuple[dict[str, Any], str, int],
                                                                      gpuscope_home: Path) -> None:
    report, _, pid = shared_run
    with Store(gpuscope_home) as store:
        samples = store.samples(report["run"]["id"])
    ticks = samples[samples["metric"] == "gpu.util"]["ts_ns"].nunique()
    own, others, parts, busy = reference_parts(ticks)
    (share,) = report["live"]["shares"]
    assert share["gpu"] == 0 and share["shared"] is True and share["other_processes_max"] == 1
    assert share["own_sm_mean"] == pytest.approx(sum(own) / ticks)
    assert share["others_sm_mean"] == pytest.approx(sum(others) / ticks)
    assert share["gpu_busy_mean"] == pytest.approx(sum(busy) / ticks) and share["own_sm_mean"] < 0.01
    assert share["own_memory_peak_bytes"] == 7132413952  # the light process's memory as NVML reported it
    assert share["cost_part"] == pytest.approx(sum(parts) / ticks) and share["cost_basis"] == "measured"
    (gpu,) = report["live"]["gpus"]
    assert gpu["busy_source"] == "own_sm" and gpu["busy_mean"] == share["own_sm_mean"]
    assert gpu["util_mean"] == share["gpu_busy_mean"], "the GPU's own utilization stays what NVML said"

    cost = report["cost"]
    held_h = share["held_s"] / 3600
    assert share["held_s"] == pytest.approx(report["live"]["duration_s"])
    assert cost["held_usd"] == pytest.approx(held_h * H200_USD)
    assert cost["own_usd"] == pytest.approx(held_h * H200_USD * sum(parts) / ticks)
    assert cost["neighbours_usd"] == pytest.approx(held_h * H200_USD * sum(others) / ticks)
    assert cost["own_basis"] == "measured" and cost["own_usd"] < cost["held_usd"]

    # Its own work was under 1% of the SMs: idle from its side, slowed by its neighbour, and a small slice fits it.
    assert report["verdict"]["primary"] != "gpu_compute"
    codes = {f["code"] for f in report["findings"]}
    assert "shared_gpu_contention" in codes and "gpu_busy_high" not in codes
    recs = {r["code"]: r for r in report["recommendations"]}
    assert "isolate_gpu" in recs
    # 7.13 GB x 1.25 fits the H200's smallest slice (1g.18gb), and its SM share x 7 stays under 60%:
    # 1 of 7 slices costs 1/7 of 10.60 USD, so 6/7 of it, 9.09 USD, is saved each hour.
    assert recs["mig_slice"]["title"] == "Fits on a MIG 1g.18gb slice (or MPS)"
    assert "saves ~$9.09 per hour" in " ".join(shared_run[1].split())  # said once, in the saving


def test_the_terminal_shows_the_share_beside_the_whole(shared_run: tuple[dict[str, Any], str, int]) -> None:
    report, text, _ = shared_run
    flat = " ".join(text.split())
    share = report["live"]["shares"][0]
    assert (f"GPU 0, shared with 1 other process: this job {share['own_sm_mean'] * 100:.1f}% of SM time, 6.6 of "
            f"140.4 GiB; GPU busy {share['gpu_busy_mean'] * 100:.1f}%") in flat
    usd = report["cost"]
    assert "shared GPU this job's share " in flat and "while it held it (split by measured SM use)" in flat
    assert f"of the GPU's {fmt_usd(usd['held_usd'])}" in flat
    (contention,) = [f["title"] for f in report["findings"] if f["code"] == "shared_gpu_contention"]
    assert " ".join(contention.split()) in flat


def test_the_dashboard_shows_the_share_beside_the_whole(shared_run: tuple[dict[str, Any], str, int],
                                                         gpuscope_home: Path) -> None:
    report, _, _ = shared_run
    with Store(gpuscope_home) as store:
        page = " ".join(_text(route(RunReader(store), f"/runs/{report['run']['id']}", "")).split())
    assert "Shared GPU GPU 0, shared with 1 other process: this job" in page
    assert "Shared GPU cost this job's share " in page and "while it held it" in page
    assert "Other processes kept GPU 0 busy" in page


def test_a_run_in_a_mig_slice_is_a_gpu_of_its_own_at_its_share_of_the_price(
        gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An H100 in MIG mode (NVML's MIG device handles, mocked): the target runs in the 1g.10gb instance."""
    with started(str(SPIN), "60") as target:
        parent = FakeGpu(fail={"nvmlDeviceGetUtilizationRates": pynvml.NVMLError_NotSupported,
                               "nvmlDeviceGetProcessUtilization": pynvml.NVMLError_NotSupported})
        parent.mig = [mig_instance(parent, "1g.10gb", 9, processes=[(target.pid, 3 * 10**9)]),
                      mig_instance(parent, "3g.40gb", 2, processes=[(NEIGHBOUR, 20 * 10**9)])]
        FakeNvml([parent], monkeypatch)
        result = CliRunner().invoke(app, ["attach", str(target.pid), "--duration", "1", "--interval", "0.2",
                                          "--no-stacks", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["run"]["gpus"] == [{"model": "NVIDIA H100 80GB HBM3", "memory_bytes": 10 * 10**9, "index": 1009,
                                      "mig_profile": "1g.10gb"}]
    cost = report["cost"]
    assert cost["gpu_share"] == pytest.approx(1 / 7) and cost["usd_per_gpu_hour"] == pytest.approx(6.88 / 7)
    assert cost["total_usd"] == pytest.approx(cost["gpu_hours"] * 6.88 / 7)
    shown = CliRunner().invoke(app, ["show", report["run"]["id"]], env={"COLUMNS": "200"})
    price = "(MIG 1g.10gb: 1 of the H100 SXM 80GB's 7 compute slices, of $6.88/GPU-h)"
    for text in (shown.stdout, dashboard_text(gpuscope_home, report["run"]["id"]),
                 html_text(gpuscope_home, report["run"]["id"])):
        flat = " ".join(text.split())
        assert "1 x NVIDIA H100 80GB HBM3 MIG 1g.10gb" in flat
        assert "$0.98" in flat and price in flat


def dashboard_text(home: Path, run_id: str) -> str:
    with Store(home) as store:
        return _text(route(RunReader(store), f"/runs/{run_id}", ""))


def html_text(home: Path, run_id: str) -> str:
    """The HTML report's text (tags dropped, entities read)."""
    with Store(home) as store:
        saved = store.load_report(run_id)
    assert saved is not None
    page = render_html(ReportDocument(report=saved))
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_the_run_gpus_from_dcgm_labels_keep_the_slices_and_never_count_a_gpu_twice() -> None:
    from gpuscope.api.recording import _dcgm_gpus, _used_gpus
    from gpuscope.collectors.dcgm import describe_scrape
    from gpuscope.model.gpu import GpuInfo
    from tests.fleet.exporters import MIG_SOURCE, issue_block

    devices = describe_scrape("\n".join(issue_block(MIG_SOURCE)) + "\n")  # the real H100 MIG scrape
    gpus = _dcgm_gpus(devices.values(), None)
    assert [(g.index, g.mig_profile, g.name) for g in gpus] == [
        (1007, "1g.10gb", "NVIDIA H100 80GB HBM3"), (1008, "1g.10gb", "NVIDIA H100 80GB HBM3"),
        (1009, "1g.10gb", "NVIDIA H100 80GB HBM3")]
    # NVML could not tell which GPU the target used: every GPU, but a GPU in MIG mode only as its instances.
    parent, whole = GpuInfo(index=0, name="H100"), GpuInfo(index=1, name="H100")
    slices = (GpuInfo(index=1002, name="H100", mig_profile="3g.40gb"),
              GpuInfo(index=1009, name="H100", mig_profile="1g.10gb"))
    assert _used_gpus((parent, whole, *slices), set()) == (whole, *slices)
    assert _used_gpus((parent, whole, *slices), {1009}) == (slices[1],)


def test_in_a_container_without_the_hosts_proc_attach_says_so_in_one_line(
        gpuscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.collectors.pidns import UNMATCHED, PidNamespace

    with started(str(SPIN), "60") as target:
        FakeNvml([FakeGpu(processes=[(NEIGHBOUR, 2**30)])], monkeypatch, host_pids=True)
        monkeypatch.setattr(PidNamespace, "detect", classmethod(lambda cls, **_: cls(problem=UNMATCHED)))
        result = CliRunner().invoke(app, ["attach", str(target.pid), "--duration", "0.5", "--interval", "0.1",
                                          "--no-stacks", "--json"])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if "PID namespace" in line]
    assert warned == [f"gpuscope: warning: {UNMATCHED}"]
    report = json.loads(result.stdout)
    assert report["live"]["shares"] == [] and report["live"]["gpus"][0]["util_mean"] == pytest.approx(0.87)
