"""The report's --compare section: the change explained as `gpuscope diff` explains it, its waterfall drawn in
headless Chromium with the network off, and names from the traces kept as text."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from gpuscope.format import ms
from gpuscope.reports.browser import Browser
from gpuscope.reports.diff import signed_ms
from tests.changes.loops import write_loop
from tests.conftest import SAMPLES
from tests.reports.test_html_runs import chart_titles, invoke

HOSTILE = '<img src=x onerror="document.title=1">'


def compared(home: Path, out: Path, after: Path, before: Path) -> str:
    invoke(home, "report", str(after), "--compare", str(before), "-o", str(out))
    return out.read_text(encoding="utf-8")


def diff_json(home: Path, before: Path, after: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(invoke(home, "diff", str(before), str(after), "--json").stdout)
    return doc


def test_the_section_says_what_gpuscope_diff_says(tmp_path: Path) -> None:
    home = tmp_path / "home"
    before, after = SAMPLES / "resnet50_workers4", SAMPLES / "resnet50_dataloader_bound"
    page = compared(home, tmp_path / "compare.html", after, before)
    doc = diff_json(home, before, after)
    assert page.index('id="what-changed"') < page.index('id="diff-parts"') < page.index('id="diff-price"')
    data = next(p for p in doc["parts"] if p["stage"] == "data_loading")
    row = page[page.index('id="diff-parts"'):]
    assert "<td>data wait</td>" in row and html.escape(signed_ms(data["change_us"])) in row
    assert "<td>DataLoader</td><td>worker processes (num_workers&gt;0)</td>" in page
    steps = doc["step_time_us"]  # the typical steps' means: two of the baseline's six steps are outliers
    assert any(t.startswith(f"Step time {ms(steps['baseline'])} → {ms(steps['candidate'])}")
               for t in chart_titles(page))


def test_the_waterfall_is_drawn_offline_and_trace_names_stay_text(tmp_path: Path, browser: Browser) -> None:
    home = tmp_path / "home"
    before = write_loop(tmp_path, "before")
    after = write_loop(tmp_path, HOSTILE.replace("/", "_"), kernel=HOSTILE, loader_us=600.0, step_us=1300.0)
    out = tmp_path / "compare.html"
    page_text = compared(home, out, after, before)
    assert HOSTILE not in page_text
    page = browser.page()
    page.send("Runtime.enable")
    page.open(out, offline=True)
    try:
        assert page.events("Runtime.exceptionThrown") == []
        bars = page.evaluate("(document.querySelector('figure[data-chart=waterfall] .chart') || {querySelectorAll:"
                             " () => []}).querySelectorAll('.bars path').length")
        images = page.evaluate("document.querySelectorAll('img').length")
        title = page.evaluate("document.title")
        kernels = page.evaluate("document.getElementById('diff-kernels').innerText")
    finally:
        page.close()
    assert bars >= 3  # baseline, the data wait's change, candidate
    assert images == 0 and title.startswith("gpuscope report")
    assert HOSTILE in kernels  # shown as the text it is
