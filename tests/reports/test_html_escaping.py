"""A trace whose kernel and GPU names, and runs whose names and command lines, carry script, onerror, link,
template, rich-markup and escape-sequence payloads: the HTML report (opened in headless Chromium with the network
off) and the PDF printed from it show each as text. No script runs, no element comes out of a name, no request
leaves. The report's own policy allows inline scripts, so nothing here passes because the policy blocked it."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pypdf

from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import RunMeta
from gpuscope.reports.browser import Browser
from gpuscope.reports.html import ReportDocument, title
from gpuscope.reports.pdf import render_pdf
from gpuscope.store import Store
from tests.figures.fixtures import STACKS, T0_NS, sample_rows, stack_rows
from tests.payloads import ANSI_SHOWN, RICH, hostile_report, payload, payload_trace, shown
from tests.reports.test_html_runs import FIGURE, invoke

LIVE_ID = "20261203-120000-aabbcc"
# What a page may hold that a name could have made: none of these, in a report, comes from gpuscope itself, but for
# the timeline section's own links (the step downloads, data: URLs, and the one to Perfetto's page).
ELEMENTS = ("img, iframe, object, embed, a:not([download][href^='data:']):not([href='https://ui.perfetto.dev']), "
            "svg[onload], body style, script[src], [onerror], [onload]")
INSPECT = """(() => ({
    pwned: typeof window.__pwned, elements: document.querySelectorAll(ELEMENTS).length,
    scripts: document.querySelectorAll('script').length, title: document.title,
    name: document.getElementById('run-name').textContent,
    meta: document.querySelector('header .meta').textContent,
    kernels: Array.from(document.querySelectorAll('#kernels .name')).map(e => [e.title, e.textContent]),
    ticks: Array.from(document.querySelectorAll('[data-chart=kernels] .ytick text')).map(e => e.textContent),
    body: document.body.innerText}))()""".replace("ELEMENTS", repr(ELEMENTS))


def opened(browser: Browser, path: Path) -> dict[str, Any]:
    """What the page holds once drawn with the network off, after checking it asked for nothing but itself and
    threw nothing."""
    page = browser.page()
    try:
        page.send("Runtime.enable")
        page.open(path, offline=True)
        requested = [e["request"]["url"] for e in page.events("Network.requestWillBeSent")]
        assert requested == [path.resolve().as_uri()], requested
        assert page.events("Runtime.exceptionThrown") == []
        shown_page: dict[str, Any] = page.evaluate(INSPECT)
    finally:
        page.close()
    assert shown_page["pwned"] == "undefined" and shown_page["elements"] == 0, shown_page
    assert shown_page["scripts"] == len(FIGURE.findall(path.read_text())) + 2  # figures, plotly.js, the loader
    return shown_page


def test_a_hostile_trace_and_run_name_are_text_in_the_html_and_pdf_report(browser: Browser, tmp_path: Path) -> None:
    trace, kernel = payload_trace(tmp_path)
    home = tmp_path / "home"
    invoke(home, "analyze", str(trace), "--name", payload())
    with Store(home) as store:
        (run_id,) = [m.id for m in store.list_runs()]
    out = tmp_path / "trace.html"
    invoke(home, "report", run_id, "-o", str(out))
    page = opened(browser, out)
    assert page["name"] == shown(payload()) and page["title"] == f"gpuscope report: {shown(payload())}"
    assert f"1 x {shown(payload())} Tesla V100" in page["meta"]
    assert page["kernels"][0][0] == shown(kernel)  # the whole name in the tooltip, the start in the cell
    assert page["kernels"][0][1].startswith(ANSI_SHOWN[:60])
    assert page["ticks"][-1].startswith(f"1. {ANSI_SHOWN[:40]}")  # the chart's label: plotly drew it as text
    with Store(home) as store:
        saved = store.load_report(run_id)
    assert saved is not None
    pdf = render_pdf(out.read_text(), browser=browser, paper="a4", footer=title(ReportDocument(report=saved)))
    (tmp_path / "trace.pdf").write_bytes(pdf)
    text = re.sub(r"\s+", " ", "".join(p.extract_text() for p in pypdf.PdfReader(tmp_path / "trace.pdf").pages))
    assert "<script>window.__pwned='script'" in text and "onerror=" in text and "{{7*7}}" in text


def test_every_string_of_a_recorded_run_report_is_text(browser: Browser, tmp_path: Path) -> None:
    """A recorded run named and launched with the payloads, with hostile stack frames, and a report carrying them
    in every free-text field (GPUs, kernels, findings, recommendations, cost note, sources, warnings), written by
    `gpuscope report`."""
    report = hostile_report(payload())
    home = tmp_path / "home"
    with Store(home) as store:
        store.create_run(RunMeta(id=LIVE_ID, name=payload(), kind="run", status="complete", started_ns=T0_NS,
                                 ended_ns=T0_NS + 90 * 10**9, pid=4242, command=("python", "train.py", payload()),
                                 gpus=(GpuInfo(index=0, name=f"{payload()} H100", memory_bytes=80 * 2**30),)))
        store.add_samples(LIVE_ID, sample_rows(gpus=2, seconds=90))
        store.add_stacks(LIVE_ID, stack_rows(), {k: tuple(f"{payload()} {f}" for f in v) for k, v in STACKS.items()})
        store.save_report(LIVE_ID, replace(report, run=replace(report.run, id=LIVE_ID, kind="run")))
    path = tmp_path / "recorded.html"
    invoke(home, "report", LIVE_ID, "-o", str(path))
    page = opened(browser, path)
    body = page["body"]
    assert page["name"] == f"{shown(payload())} resnet <b>bold</b>"
    for part in ("Use more DataLoader workers", "The GPU waits for input", "no price for this GPU",
                 "rank 1: 12 events", "Tesla V100-DGXS-32GB", "nvml, " + shown(payload())):
        assert f"{shown(payload())} {part}" in body, part
    assert body.count(RICH) >= 15
