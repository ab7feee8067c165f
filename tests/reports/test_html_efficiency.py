"""The HTML report's useful work: MFU on page one and in its card with the peak and its source, the roofline chart
the dashboard draws (the V100's ceilings from its datasheet), drawn offline in headless Chromium; a GPU not in the
spec table is MFU n/a with the reason, its name inert."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpuscope.format import pct
from gpuscope.reports.browser import Browser
from tests.conftest import SAMPLES
from tests.reports.test_html_runs import invoke, report_json

TRICKY_GPU = '<img src=x onerror="alert(1)"> Mystery & co'
V100_FP32_TFLOPS, V100_TB_S = 15.7, 0.9
"""NVIDIA's V100 datasheet (SXM2): 15.7 TFLOP/s fp32, 900 GB/s."""


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """name -> (the HTML file `gpuscope report` wrote, the run's `show --json`)."""
    folder = tmp_path_factory.mktemp("report-efficiency")
    home = folder / "home"
    doc = json.loads(gzip.decompress(next((SAMPLES / "dlrm_8rank").glob("worker0_*.json.gz")).read_bytes()))
    for device in doc.get("deviceProperties", []):
        device["name"] = TRICKY_GPU
    mystery = folder / "mystery.json"
    mystery.write_text(json.dumps(doc))
    out = {}
    for name, path in (("v100", SAMPLES / "resnet50_dataloader_bound"), ("mystery", mystery)):
        html = folder / f"{name}.html"
        invoke(home, "report", str(path), "-o", str(html))
        run_id = re.search(r"gpuscope report · trace run (\S+) ", html.read_text())
        assert run_id is not None
        out[name] = (html, report_json(home, run_id.group(1)))
    return out


def figures_in(text: str) -> list[dict[str, Any]]:
    return [json.loads(block) for block in re.findall(r'<script type="application/json" id="fig-\d+">(.*?)</script>',
                                                      text, flags=re.S)]


def test_mfu_on_page_one_and_the_roofline_under_the_v100s_ceilings(pages: dict[str, tuple[Path, dict[str, Any]]],
                                                                   browser: Browser) -> None:
    path, report = pages["v100"]
    text = path.read_text()
    tile = re.search(r'id="kpi-busy">.*?<div class="sub">([^<]*)</div>', text)
    assert tile is not None and f"MFU {pct(report['efficiency']['mfu'])} of 15.7 TFLOP/s fp32" in tile.group(1)
    assert 'id="mfu-card"' in text and "volta-v100-datasheet" in text
    (roofline,) = [f for f in figures_in(text) if f["layout"]["title"]["text"].startswith("Roofline")]
    memory, compute, points, above = roofline["data"]
    assert roofline["layout"]["xaxis"]["type"] == roofline["layout"]["yaxis"]["type"] == "log"
    assert compute["y"] == [V100_FP32_TFLOPS, V100_FP32_TFLOPS]
    assert memory["y"][0] / memory["x"][0] == pytest.approx(V100_TB_S)
    placed = [f for f in report["efficiency"]["families"] if f["intensity"] and f["achieved_tflops"]]
    assert points["x"] == pytest.approx([f["intensity"] for f in placed if f["flag"] is None])
    # The GEMM stage of cuDNN's Winograd convolutions runs above the fp32 peak: drawn apart, its cause on hover.
    flagged = [f for f in placed if f["flag"] is not None]
    assert [f["family"] for f in flagged] == ["gemm"] and flagged[0]["flag"]["cause"] == "winograd"
    assert above["x"] == pytest.approx([f["intensity"] for f in flagged]) and above["marker"]["symbol"] == "x"
    assert "Winograd" in above["customdata"][0][5] and "above peak (Winograd)" in text
    page = browser.page()
    try:
        page.open(path, offline=True)
        titles = page.evaluate("Array.from(document.querySelectorAll('div.chart .gtitle')).map(t => t.textContent)")
        points_drawn = page.evaluate(
            "Array.from(document.querySelectorAll('div.chart')).filter(d => (d.querySelector('.gtitle') || {})"
            ".textContent?.startsWith('Roofline')).map(d => d.querySelectorAll('.point').length)")
    finally:
        page.close()
    assert any(t.startswith("Roofline: V100 SXM2 32GB, fp32 peak 15.7 TFLOP/s") for t in titles)
    assert points_drawn == [len(placed)]


def test_a_gpu_not_in_the_table_is_mfu_na_with_the_reason(pages: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    path, report = pages["mystery"]
    text = path.read_text()
    assert report["efficiency"]["mfu"] is None
    tile = re.search(r'id="kpi-busy">.*?<div class="sub">([^<]*)</div>', text)
    assert tile is not None and "MFU n/a" in tile.group(1)
    note = re.search(r'id="mfu-note">MFU n/a: ([^<]*)</p>', text)
    assert note is not None and "is not in the GPU spec table" in note.group(1)
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt; Mystery &amp; co" in note.group(1)
    assert "<img" not in text  # the name stays text everywhere
