"""The HTML report: one offline file (checked in headless Chromium with the network off), page one first,
the same numbers as --json and the terminal, every chart drawn, user text inert."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from rich.console import Console

from gpuscope import figures
from gpuscope.cli.report import Pricing, document
from gpuscope.format import pct, usd
from gpuscope.reports.browser import Browser, Page
from gpuscope.reports.html import ReportDocument, render_html
from gpuscope.reports.terminal import render
from gpuscope.store import Store
from tests.figures.fixtures import empty_report
from tests.reports.test_html_runs import LIVE_NAME, Runs, chart_titles, invoke, report_json


def write(runs: Runs, run_id: str, folder: Path) -> tuple[Path, str]:
    with Store(runs.home) as store:
        page = render_html(document(store, run_id, Pricing()))
    path = folder / f"{run_id}.html"
    path.write_text(page, encoding="utf-8")
    return path, page


def opened_offline(browser: Browser, path: Path) -> Page:
    page = browser.page()
    page.send("Runtime.enable")
    page.open(path, offline=True)
    return page


@pytest.mark.parametrize("which", ["trace", "8 ranks", "live"])
def test_one_file_that_draws_every_chart_with_the_network_off(runs: Runs, browser: Browser, tmp_path: Path,
                                                              which: str) -> None:
    path, text = write(runs, runs.ids()[which], tmp_path)
    titles = chart_titles(text)
    assert titles, "every run here has charts"
    page = opened_offline(browser, path)
    try:
        requested = [e["request"]["url"] for e in page.events("Network.requestWillBeSent")]
        assert requested == [path.resolve().as_uri()], "the page loads nothing but itself"
        assert page.events("Network.loadingFailed") == []
        assert page.events("Runtime.exceptionThrown") == []
        drawn: list[dict[str, Any]] = page.evaluate(
            "Array.from(document.querySelectorAll('div.chart')).map(d => ({"
            "  title: (d.querySelector('.gtitle') || {}).textContent || '',"
            "  marks: d.querySelectorAll('.point, .bars path, .scatterlayer path.js-line, .slice').length}))")
    finally:
        page.close()
    assert [d["title"] for d in drawn] == titles
    assert all(d["marks"] > 0 for d in drawn), drawn


def test_page_one_is_the_summary_with_the_numbers_of_json_and_terminal(runs: Runs, browser: Browser,
                                                                       tmp_path: Path) -> None:
    """The 8-rank run, projected to a 24-hour job when it was analysed."""
    path, _ = write(runs, runs.ranks8_id, tmp_path)
    doc = report_json(runs.home, runs.ranks8_id)
    page = opened_offline(browser, path)
    try:
        shown: dict[str, Any] = page.evaluate("""(() => {
            const text = s => (document.querySelector(s) || {}).textContent || null;
            const summary = document.getElementById('summary');
            return {verdict: text('#verdict'), busy: text('#kpi-busy .value'), cost: text('#kpi-cost .value'),
                    wasted: text('#kpi-wasted .value'), projected: text('#kpi-projected .value'),
                    titles: Array.from(document.querySelectorAll('#top-recommendations .rec-title'))
                                 .map(e => e.textContent),
                    all: Array.from(document.querySelectorAll('#recommendations > li > strong'))
                              .map(e => e.textContent),
                    causes: document.querySelectorAll('#waste tbody tr').length,
                    summaryFirst: summary.compareDocumentPosition(document.getElementById('details'))
                                  === Node.DOCUMENT_POSITION_FOLLOWING};
        })()""")
    finally:
        page.close()
    cost, recs = doc["cost"], doc["recommendations"]
    assert shown["verdict"] == doc["verdict"]["summary"]
    assert shown["busy"] == pct(doc["facts"]["gpu_busy"])  # the one GPU busy figure every view shows
    assert (shown["cost"], shown["wasted"], shown["projected"]) == (
        usd(cost["total_usd"]), pct(cost["wasted_usd"] / cost["total_usd"]), usd(cost["projected_usd"]))
    assert shown["titles"] == [r["title"] for r in recs[:3]] and len(recs) > 3
    assert shown["all"] == [r["title"] for r in recs]
    assert shown["causes"] == sum(1 for v in cost["waste_by_cause_usd"].values() if v)
    assert shown["summaryFirst"]
    with Store(runs.home) as store:
        report = store.load_report(runs.ranks8_id)
    assert report is not None
    terminal = io.StringIO()
    render(report, Console(file=terminal, width=200, highlight=False))
    for number in (usd(cost["total_usd"]), usd(cost["projected_usd"]), f"~{usd(recs[0]['est_saving_usd'])}"):
        assert number in terminal.getvalue() and str(escape(number)) in path.read_text()


def test_live_report_has_timelines_stacks_and_keeps_user_text_inert(runs: Runs, browser: Browser,
                                                                    tmp_path: Path) -> None:
    path, text = write(runs, runs.live_id, tmp_path)
    titles = chart_titles(text)
    assert {"GPU timelines", "Host CPU and I/O"} <= set(titles)
    assert any(t.startswith("Stack samples (100 samples") for t in titles)
    assert "<img src=x" not in text
    page = opened_offline(browser, path)
    try:
        assert page.evaluate("document.getElementById('run-name').textContent") == LIVE_NAME
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        gpus = page.evaluate("document.querySelectorAll('#live-gpus tbody tr').length")
    finally:
        page.close()
    assert gpus == 2


def test_compare_makes_a_before_and_after_report(runs: Runs, tmp_path: Path) -> None:
    out = tmp_path / "compare.html"
    invoke(runs.home, "report", runs.ranks8_id, "--compare", runs.trace_id, "-o", str(out))
    text = out.read_text()
    with Store(runs.home) as store:
        after, before = store.load_report(runs.ranks8_id), store.load_report(runs.trace_id)
    assert after is not None and before is not None
    for delta in figures.compare(before, after):
        assert f"<td>{delta.label}</td>" in text and str(escape(delta.change)) in text
    assert "Step time breakdown, A vs B" in chart_titles(text)
    assert text.index('id="deltas"') < text.index('id="details"'), "the deltas are on page one"


def test_a_price_for_a_saved_run_analyses_it_again(runs: Runs, tmp_path: Path) -> None:
    out = tmp_path / "priced.html"
    invoke(runs.home, "report", runs.live_id, "--usd-per-gpu-hour", "10", "--job-hours", "48", "-o", str(out))
    cost = report_json(runs.home, runs.live_id)["cost"]
    assert cost["usd_per_gpu_hour"] == 10 and cost["projection_basis"] == "job_hours"
    assert cost["total_usd"] == pytest.approx(cost["gpu_hours"] * 10)
    text = out.read_text()
    for value in (cost["total_usd"], cost["projected_usd"]):
        assert f'<div class="value">{usd(value)}</div>' in text


def test_a_run_with_nothing_analysed_says_what_is_missing(browser: Browser, tmp_path: Path) -> None:
    path = tmp_path / "empty.html"
    path.write_text(render_html(ReportDocument(report=empty_report())), encoding="utf-8")
    text = path.read_text()
    assert chart_titles(text) == [] and len(text) < 100_000, "no chart, so no plotly.js either"
    page = opened_offline(browser, path)
    try:
        shown = page.evaluate("({verdict: document.getElementById('verdict').textContent,"
                              " busy: document.querySelector('#kpi-busy .value').textContent,"
                              " cost: document.querySelector('#kpi-cost .value').textContent,"
                              " absent: document.querySelectorAll('#absent tbody tr').length})")
    finally:
        page.close()
    assert shown == {"verdict": "No verdict: not enough evidence in this run.", "busy": "n/a", "cost": "n/a",
                     "absent": 6}


def test_page_one_says_what_the_job_was_training_or_serving(runs: Runs, tmp_path: Path) -> None:
    _, page = write(runs, runs.ranks8_id, tmp_path)
    assert '<p class="dim" id="workload">workload: training (' in page
