"""The HTML report of every bundled trace stays under 2 MB with plotly.js in it once, gzipped, and draws every chart
in headless Chromium with the network off; a figure the shipped partial plotly.js cannot draw gets the full one."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import plotly.graph_objects as go
import plotly.offline
import pytest

from gpuscope.reports.browser import Browser
from gpuscope.reports.html_blocks import CSP, Charts
from gpuscope.reports.plotly_bundle import PARTIAL_TRACES, partial_version, plotly_js_gz
from tests.analyzers.bundled import ALL
from tests.conftest import SAMPLES
from tests.reports.test_html_runs import chart_titles, invoke

MAX_BYTES = 2_000_000
DRAWN = ("Array.from(document.querySelectorAll('div.chart')).map(d => "
         "d.querySelectorAll('.point, .bars path, .scatterlayer path.js-line, .slice').length)")
PACKED = re.compile(r'<script type="application/gzip;base64" id="plotly-js-gz">')


def test_the_shipped_partial_build_is_the_plotly_js_of_the_installed_plotly() -> None:
    assert partial_version() == plotly.offline.get_plotlyjs_version(), "rebuild it: scripts/plotly_bundle"
    source = gzip.decompress(plotly_js_gz({"bar"})).decode()
    assert f"plotly.js v{partial_version()}" in source[:200]
    assert len(source) < len(plotly.offline.get_plotlyjs()) / 2


def open_offline(browser: Browser, path: Path) -> list[int]:
    page = browser.page()
    try:
        page.send("Runtime.enable")
        page.open(path, offline=True)
        assert [e["request"]["url"] for e in page.events("Network.requestWillBeSent")] == [path.resolve().as_uri()]
        assert page.events("Runtime.exceptionThrown") == []
        marks: list[int] = page.evaluate(DRAWN)
    finally:
        page.close()
    return marks


@pytest.mark.parametrize("sample", ALL)
def test_every_bundled_samples_report_is_small_and_draws(browser: Browser, tmp_path: Path, sample: str) -> None:
    out = tmp_path / "report.html"
    invoke(tmp_path / "home", "report", str(SAMPLES / sample), "-o", str(out))
    text = out.read_text(encoding="utf-8")
    assert out.stat().st_size < MAX_BYTES
    titles = chart_titles(text)
    assert len(PACKED.findall(text)) == (1 if titles else 0), "plotly.js once, and only where a chart needs it"
    assert "plotly.js v" not in text, "no plotly.js left uncompressed"
    marks = open_offline(browser, out)
    assert len(marks) == len(titles) and all(m > 0 for m in marks), marks


def test_a_trace_type_outside_the_partial_build_gets_the_full_plotly_js(browser: Browser, tmp_path: Path) -> None:
    assert "pie" not in PARTIAL_TRACES
    charts = Charts()
    block = charts.block("pie", go.Figure(go.Pie(labels=["a", "b"], values=[1, 2])))
    assert charts.trace_types() == {"pie"}
    assert gzip.decompress(plotly_js_gz({"pie"})).decode() == plotly.offline.get_plotlyjs()
    path = tmp_path / "pie.html"
    path.write_text(f'<!doctype html><html data-charts="loading"><head><meta charset="utf-8">'
                    f'<meta http-equiv="Content-Security-Policy" content="{CSP}"></head>'
                    f"<body>{block}{charts.scripts()}</body></html>", encoding="utf-8")
    assert open_offline(browser, path) == [2]
