"""The stragglers in every view of a report: `--json`, the terminal and the HTML report (drawn in headless
Chromium with the network off), for the real 4-rank gloo job with rank 2 delayed and without."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuscope.format import ms, usd
from gpuscope.reports.browser import Browser
from gpuscope.reports.html import ReportDocument, render_html
from gpuscope.store import Store
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES

GLOO = SAMPLES / "gloo_4rank"
FIELDS = {"rank", "score", "late_share", "wait_caused_us", "cause", "usd"}


def _json(folder: Path, home: Path) -> dict[str, Any]:
    result = gpuscope("analyze", str(folder), "--json", "--usd-per-gpu-hour", "2", home=home)
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_json_and_terminal_agree(tmp_path: Path) -> None:
    doc = _json(GLOO / "delayed", tmp_path)
    (top,) = doc["stragglers"]
    # A CPU job (gloo on the CPU): no GPU waits, so no GPU price for the wait, even with a price per GPU-hour given.
    assert FIELDS <= set(top) and top["rank"] == 2 and top["usd"] is None
    assert doc["verdict"]["evidence"]["straggler_rank"] == 2
    shown = gpuscope("show", doc["run"]["id"], home=tmp_path)
    text = " ".join(shown.stdout.replace("│", " ").split())  # the panel's borders out of the wrapped sentences
    assert f"rank 2: the others wait {ms(top['wait_caused_us'])} per step for it" in text
    assert "cost n/a this run, n/a per 1,000 steps" in text
    assert "cause: host time no profiled event covers" in text
    gpu = _json(SAMPLES / "dlrm_8rank", tmp_path)  # GPUs that wait are priced
    top = gpu["stragglers"][0]
    assert top["rank"] == 7 and top["usd"] > 0
    shown = gpuscope("show", gpu["run"]["id"], home=tmp_path)
    text = " ".join(shown.stdout.replace("│", " ").split())
    assert f"{usd(top['usd'] / gpu['facts']['steady_steps'] * 1000)} per 1,000 steps" in text
    balanced = gpuscope("analyze", str(GLOO / "balanced"), home=tmp_path)
    assert "No straggler: a rank is a straggler when" in " ".join(balanced.stdout.split())


def test_html_section_and_chart_drawn_offline(tmp_path: Path, browser: Browser) -> None:
    doc = _json(GLOO / "delayed", tmp_path)
    with Store(tmp_path) as store:
        report = store.load_report(doc["run"]["id"])
    assert report is not None
    page_text = render_html(ReportDocument(report=report))
    assert 'id="stragglers-table"' in page_text and 'data-chart="arrivals"' in page_text
    path = tmp_path / "report.html"
    path.write_text(page_text, encoding="utf-8")
    page = browser.page()
    try:
        page.open(path, offline=True)
        rows = page.evaluate("Array.from(document.querySelectorAll('#stragglers-table tbody tr'))"
                             ".map(r => r.cells[0].textContent)")
        bars = page.evaluate("document.querySelectorAll('figure[data-chart=arrivals] .bars path').length")
    finally:
        page.close()
    assert rows == ["2"] and bars == 4
