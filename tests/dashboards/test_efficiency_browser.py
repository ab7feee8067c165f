"""The dashboard's useful work in a real headless Chromium: the MFU card with its peak and source, the log-log roofline
with the V100's ceilings from its datasheet, each operator's FLOPs on the operators tab; a GPU not in the spec table
shows MFU n/a with the reason, its name staying text."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from typer.testing import CliRunner

from gpuscope.cli.main import app as cli
from gpuscope.format import pct
from gpuscope.store import Store
from tests.conftest import SAMPLES
from tests.dashboards.browser import module_browser
from tests.dashboards.serving import dashboard
from tests.dashboards.test_browser import _charts, _count, _grid_rows, _no_console_errors, _open, _screenshot, _text

TRICKY_GPU = '<img src=x onerror="alert(1)"> Mystery GPU'
V100_FP32_TFLOPS, V100_TB_S = 15.7, 0.9
"""NVIDIA's V100 datasheet (SXM2): 15.7 TFLOP/s fp32, 900 GB/s."""


@dataclass(frozen=True)
class Runs:
    url: str
    store: Store
    known: str
    unknown: str


def _renamed_dlrm(folder: Path) -> Path:
    doc = json.loads(gzip.decompress(next((SAMPLES / "dlrm_8rank").glob("worker0_*.json.gz")).read_bytes()))
    for device in doc.get("deviceProperties", []):
        device["name"] = TRICKY_GPU
    out = folder / "mystery.json"
    out.write_text(json.dumps(doc))
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    yield from module_browser()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    folder = tmp_path_factory.mktemp("efficiency")
    home = folder / "home"
    for path in (SAMPLES / "resnet50_dataloader_bound", _renamed_dlrm(folder)):
        result = CliRunner().invoke(cli, ["analyze", str(path)], env={"GPUSCOPE_HOME": str(home)})
        assert result.exit_code == 0, result.output
    store = Store(home)
    ids = {m.name: m.id for m in store.list_runs()}
    with dashboard(store) as port:
        yield Runs(url=f"http://127.0.0.1:{port}", store=store, known=ids["resnet50_dataloader_bound"],
                   unknown=ids["mystery.json"])
    store.close()


def _figure(browser: webdriver.Chrome, graph_id: str) -> dict[str, Any]:
    """The data and layout plotly drew in the page."""
    return dict(browser.execute_script(
        "const p = document.querySelector('#' + arguments[0] + ' .js-plotly-plot');"
        "return {data: p.data.map(t => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y)})),"
        " xtype: p.layout.xaxis.type, ytype: p.layout.yaxis.type, title: p.layout.title.text};", graph_id))


def test_mfu_card_and_the_roofline_under_the_v100s_ceilings(browser: webdriver.Chrome, runs: Runs) -> None:
    report = runs.store.load_report(runs.known)
    assert report is not None and report.efficiency is not None and report.facts is not None
    _open(browser, f"{runs.url}/runs/{runs.known}", "#mfu-card")
    card = _text(browser, "#mfu-card") or ""
    assert f"MFU\t{pct(report.facts.mfu)}" in card and "Peak\t15.7 TFLOP/s fp32 per GPU (V100 SXM2 32GB)" in card
    assert "volta-v100-datasheet" in card and _count(browser, "#mfu-note") == 0
    assert "chart-roofline" in _charts(browser, 3)
    fig = _figure(browser, "chart-roofline")
    assert fig["xtype"] == fig["ytype"] == "log"
    memory, compute, points, above = fig["data"]
    assert compute["y"] == [V100_FP32_TFLOPS, V100_FP32_TFLOPS]
    assert memory["y"][0] / memory["x"][0] == pytest.approx(V100_TB_S)  # TFLOP/s per FLOP/byte is TB/s
    assert memory["x"][1] == pytest.approx(compute["x"][0]) == pytest.approx(V100_FP32_TFLOPS / V100_TB_S)
    placed = [f for f in report.efficiency.families if f.intensity and f.achieved_tflops]
    plain = [f for f in placed if f.flag is None]
    assert points["x"] == pytest.approx([f.intensity for f in plain])
    assert points["y"] == pytest.approx([f.achieved_tflops for f in plain])
    # Above the fp32 peak (the GEMM stage of cuDNN's Winograd convolutions): drawn apart, named as such.
    assert [f.family for f in placed if f.flag is not None] == ["gemm"] and above["name"].startswith("above a ceiling")
    _screenshot(browser, "run_roofline")
    _no_console_errors(browser)


def test_a_gpu_not_in_the_table_shows_mfu_na_and_why(browser: webdriver.Chrome, runs: Runs) -> None:
    _open(browser, f"{runs.url}/runs/{runs.unknown}", "#mfu-note")
    note = _text(browser, "#mfu-note") or ""
    assert note.startswith(f"MFU n/a: '{TRICKY_GPU}' is not in the GPU spec table")
    assert "MFU\tn/a" in (_text(browser, "#mfu-card") or "") and _count(browser, "main img") == 0
    _charts(browser, 2)
    fig = _figure(browser, "chart-roofline")
    assert [t["name"] for t in fig["data"]] == ["kernel families"]  # no ceilings without the GPU's spec
    assert "no ceilings" in fig["title"]
    _no_console_errors(browser)


def test_the_operators_tab_has_each_operators_flops_and_roofline(browser: webdriver.Chrome, runs: Runs) -> None:
    _open(browser, f"{runs.url}/runs/{runs.known}/ops", "#ops-table div.ag-row")
    head = _text(browser, "#ops-table div.ag-header") or ""
    for column in ("GFLOP", "TFLOP/s", "TB/s", "FLOP/byte", "% of roofline"):
        assert column in head
    cells = next((r for r in _grid_rows(browser, "#ops-table") if r["name"] == "aten::cudnn_convolution_backward"),
                 None)
    assert cells is not None and cells["dtype"] == "fp32"
    assert float(cells["tflops"]) > 0 and 0 < float(cells["roofline_pct"]) <= 100
    _no_console_errors(browser)
