"""Every GPU found, and only GPUs: a pinned process's GPU is named and priced, ROCm memory is read, an empty name
is unknown and never priced, and a trace with no GPU activity is a CPU job with no GPU count, time or price."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

import gpuscope
from gpuscope.console import SafeConsole
from gpuscope.model.report import Report
from gpuscope.reports.html import ReportDocument, render_html
from gpuscope.reports.terminal import render
from tests import builders as b
from tests.conftest import ROOT, SAMPLES
from tests.traces.test_devices import MI300X, doc, pinned_work

GLOO = SAMPLES / "cpu_gloo_ddp"


def catalog_price(model: str) -> float:
    """The shipped catalog's price for ``model``, read from the file itself."""
    entries = json.loads((ROOT / "gpuscope" / "data" / "prices.json").read_text())["gpus"]
    price: float = next(e["usd_per_gpu_hour"] for e in entries if e["model"] == model)
    return price


def analysed(path: Path, **options: Any) -> Report:
    return gpuscope.analyze(path, **options).analysis


def terminal(report: Report) -> str:
    console = SafeConsole(record=True, width=120, file=io.StringIO())
    render(report, console)
    return console.export_text()


def test_a_pinned_rocm_process_is_named_priced_and_its_peak_memory_read(tmp_path: Path, gpuscope_home: Path) -> None:
    report = analysed(b.write(tmp_path / "t.json", doc(pinned_work(3), [MI300X])))
    assert [(g.model, g.index) for g in report.run.gpus] == [("AMD Instinct MI300X", 3)]
    assert report.cost is not None and report.cost.usd_per_gpu_hour == catalog_price("MI300X")
    memory = report.ranks[0].memory  # HIP allocations (Device Type 6): 1 GiB, then half of it freed
    assert (memory.peak_allocated_bytes, memory.device_bytes) == (2**30, MI300X["totalGlobalMem"])
    assert memory.peak_share == pytest.approx(2**30 / MI300X["totalGlobalMem"])
    assert any("GPU work ran on device 3" in w for w in report.warnings)


@pytest.mark.parametrize("device_type", [1, 6, 12, 13], ids=["CUDA", "HIP", "XPU", "MPS"])
def test_memory_of_every_gpu_device_type_and_none_of_the_host(tmp_path: Path, gpuscope_home: Path,
                                                              device_type: int) -> None:
    events = [b.cpu_op("aten::mm", 0, 100), b.launch(10, 5, 1), b.kernel("gemm", 20, 50, 1),
              b.memory(1, 3 * 2**30, 3 * 2**30, device_type=device_type),
              b.memory(2, -2**30, 2 * 2**30, device_type=device_type),
              b.memory(3, 9 * 2**30, 9 * 2**30, device_type=0, device_id=-1)]  # the host's: not device memory
    memory = analysed(b.write(tmp_path / "t.json", b.trace(events))).ranks[0].memory
    assert memory.peak_allocated_bytes == 3 * 2**30


def test_a_real_mi300x_trace_of_a_pinned_process(gpuscope_home: Path) -> None:
    path = SAMPLES / "dev" / "sglang_decode_cudagraph_bs32.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))
    hip = [e["args"] for e in raw["traceEvents"] if e.get("name") == "[memory]" and e["args"]["Device Type"] == 6]
    kernel_devices = {e["args"]["device"] for e in raw["traceEvents"] if e.get("cat") == "kernel"}
    report = analysed(path)
    assert [(g.model, g.index) for g in report.run.gpus] == [(raw["deviceProperties"][0]["name"], *kernel_devices)]
    assert report.cost is not None and report.cost.usd_per_gpu_hour == catalog_price("MI300X")
    assert report.ranks[0].memory.peak_allocated_bytes == max(a["Total Allocated"] for a in hip)


@pytest.mark.parametrize("name", ["", None])
def test_an_unnamed_gpu_is_unknown_and_not_priced(tmp_path: Path, gpuscope_home: Path, name: str | None) -> None:
    device = {**MI300X, "name": name}
    report = analysed(b.write(tmp_path / "t.json", doc(pinned_work(0), [device])))
    assert [g.model for g in report.run.gpus] == [None] and report.ranks[0].device is None
    assert report.cost is not None and report.cost.usd_per_gpu_hour is None and report.cost.total_usd is None


def test_the_real_vllm_trace_with_blank_device_names_is_not_priced(gpuscope_home: Path) -> None:
    report = analysed(SAMPLES / "dev" / "vllm_decode_graph_capture.json.gz")
    assert [g.model for g in report.run.gpus] == [None]
    assert report.cost is not None and report.cost.usd_per_gpu_hour is None


def assert_cpu_job(report: Report) -> None:
    assert report.cpu_job and report.run.gpus == () and report.cost is None
    assert all(r.cpu_only and r.gpu_count == 0 and r.devices == () for r in report.ranks)
    assert (report.verdict.summary or "").startswith("A CPU job")
    text = terminal(report)
    assert "CPU only" in text
    for words in ("GPU-s", "GPU-h", "unknown GPU", "GPU busy", "x unknown", "$", "peak memory"):
        assert words not in text, words
    page = render_html(ReportDocument(report=report))  # (its glossary still defines GPU-hours, for any run)
    assert "CPU only" in page and 'id="cost"' not in page and "GPUs charged" not in page
    for words in ("GPU-s", "/GPU-h", "unknown GPU", 'id="kpi-busy"'):
        assert words not in page, words


def test_a_real_cpu_only_gloo_job_is_a_cpu_job(gpuscope_home: Path) -> None:
    report = analysed(GLOO, usd_per_gpu_hour=2.0)  # a price changes nothing: there is no GPU time to price
    assert len(report.ranks) == 4 and {r.world_size for r in report.ranks} == {4}
    assert_cpu_job(report)


def test_gpus_listed_but_never_used_make_no_gpu_job(tmp_path: Path, gpuscope_home: Path) -> None:
    events = [b.step(0, 0, 1000), b.cpu_op("aten::mm", 10, 500), b.step(1, 1000, 1000), b.cpu_op("aten::mm", 1010, 500),
              b.memory(20, 4096, 4096, device_type=0, device_id=-1)]
    assert_cpu_job(analysed(b.write(tmp_path / "t.json", b.trace(events))))  # deviceProperties lists an H100
