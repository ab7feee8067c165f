"""The dashboard with hostile names, in a real headless Chromium: a trace whose kernel and GPU names, and a
recorded run whose name, command line, GPUs, stack frames and report carry script, onerror, link, template,
rich-markup and escape-sequence payloads. Every page shows them as text: no script runs, no element comes out of
a name, no request reaches the listener the payloads point at, no Content-Security-Policy violation is logged,
and a password in the command line is never shown."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from selenium import webdriver
from typer.testing import CliRunner

from gpuscope.cli.main import app as cli
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import RunMeta
from gpuscope.store import Store
from tests.dashboards.serving import dashboard
from tests.dashboards.test_browser import _charts, _grid_rows, _no_console_errors, _open, _text
from tests.figures.fixtures import STACKS, sample_rows, stack_rows
from tests.payloads import ANSI_SHOWN, RICH, hostile_report, payload, payload_trace, shown
from tests.servers import serving

RUN_ID = "20261203-120000-ddeeff"
SECRET = "s3cret-pa55"
# What a page could hold that a name made: gpuscope's pages have none of these.
ELEMENTS = ("img, iframe, object, embed, svg[onload], [onerror], [onload], a[href^='javascript'], "
            "main script, main style")
INSPECT = ("return {pwned: typeof window.__pwned, elements: document.querySelectorAll(arguments[0]).length, "
           "title: document.title};")


class Listener:
    """An HTTP server on loopback that counts what reaches it: where every payload sends its requests."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                seen.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/leak"


@dataclass(frozen=True)
class Hostile:
    url: str
    trace_id: str
    kernel: str
    leak: Listener


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    leak = Listener()
    folder = tmp_path_factory.mktemp("hostile")
    text = payload(leak.url)
    trace, kernel = payload_trace(folder, leak.url)
    home = folder / "home"
    result = CliRunner().invoke(cli, ["analyze", str(trace), "--name", text], env={"GPUSCOPE_HOME": str(home)})
    assert result.exit_code == 0, result.output
    store = Store(home)
    (trace_id,) = [m.id for m in store.list_runs()]
    started = time.time_ns() - 90 * 10**9
    command = ("python", "train.py", "--data", f"https://alice:{SECRET}@data.example/set", text)
    store.create_run(RunMeta(id=RUN_ID, name=text, kind="run", status="complete", started_ns=started,
                             ended_ns=started + 90 * 10**9, pid=4242, command=command,
                             gpus=(GpuInfo(index=0, name=f"{text} H100", memory_bytes=80 * 2**30),)))
    store.add_samples(RUN_ID, sample_rows(gpus=1, seconds=90, t0_ns=started))
    store.add_stacks(RUN_ID, stack_rows(t0_ns=started), {k: tuple(f"{text} {f}" for f in v) for k, v in STACKS.items()})
    report = hostile_report(text)
    store.save_report(RUN_ID, replace(report, run=replace(report.run, id=RUN_ID, kind="run")))
    with serving(leak.server), dashboard(store) as port:
        yield Hostile(url=f"http://127.0.0.1:{port}", trace_id=trace_id, kernel=kernel, leak=leak)
    store.close()


def _inert(browser: webdriver.Chrome, hostile: Hostile) -> None:
    """Nothing in the page came out of a name, nothing ran, nothing was blocked or sent."""
    state = browser.execute_script(INSPECT, ELEMENTS)
    assert state == {"pwned": "undefined", "elements": 0, "title": "gpuscope"}, state
    _no_console_errors(browser)  # a blocked script, style or request would be logged here
    assert hostile.leak.requests == []


def test_runs_list_shows_hostile_names_as_link_text(browser: webdriver.Chrome, hostile: Hostile) -> None:
    _open(browser, hostile.url + "/", "#runs-table div.ag-cell a")
    links = browser.execute_script("return Array.from(document.querySelectorAll('#runs-table div.ag-cell a'))"
                                   ".map(a => [a.innerText, a.getAttribute('href')]);")
    assert sorted(href for _, href in links) == sorted([f"/runs/{hostile.trace_id}", f"/runs/{RUN_ID}"])
    assert all(text == shown(payload(hostile.leak.url)) for text, _ in links), links
    _inert(browser, hostile)


def test_trace_page_shows_kernel_and_gpu_names_as_text(browser: webdriver.Chrome, hostile: Hostile) -> None:
    _open(browser, f"{hostile.url}/runs/{hostile.trace_id}", "#run-name")
    _charts(browser, 3)
    assert _text(browser, "#run-name") == shown(payload(hostile.leak.url))
    ticks = browser.execute_script("return Array.from(document.querySelectorAll('#chart-kernels .ytick text'))"
                                   ".map(e => e.textContent);")
    assert any(t.startswith(f"1. {ANSI_SHOWN[:40]}") for t in ticks), ticks
    assert f"1 x {shown(payload(hostile.leak.url))} Tesla V100" in (_text(browser, "p.meta") or "")
    _inert(browser, hostile)


def test_recorded_run_page_shows_every_string_as_text_and_no_password(browser: webdriver.Chrome,
                                                                      hostile: Hostile) -> None:
    text = shown(payload(hostile.leak.url))
    _open(browser, f"{hostile.url}/runs/{RUN_ID}", "#run-name")
    _charts(browser, 5)
    page = browser.execute_script("return document.querySelector('main').innerText;")
    assert _text(browser, "#run-name") == text
    assert f"python train.py --data https://***@data.example/set {text}"[:299] + "…" in page  # shown up to 300
    assert SECRET not in page and SECRET not in browser.page_source
    for part in ("Use more DataLoader workers", "The GPU waits for input", "rank 1: 12 events"):
        assert f"{text} {part}" in page, part
    assert page.count(RICH) >= 5
    _inert(browser, hostile)


def test_ops_page_shows_the_run_and_kernel_names_as_text(browser: webdriver.Chrome, hostile: Hostile) -> None:
    _open(browser, f"{hostile.url}/runs/{hostile.trace_id}/ops", "#ops-table div.ag-row")
    assert _text(browser, "#run-name") == shown(payload(hostile.leak.url))
    kernels = [row["kernels"] for row in _grid_rows(browser, "#ops-table")]
    assert any(shown(hostile.kernel) in k for k in kernels), kernels[:3]
    _inert(browser, hostile)


def test_compare_page_shows_both_names_as_text(browser: webdriver.Chrome, hostile: Hostile) -> None:
    _open(browser, f"{hostile.url}/compare?a={hostile.trace_id}&b={RUN_ID}", "#deltas")
    _charts(browser, 1)
    names = browser.execute_script("return Array.from(document.querySelectorAll('main h3 a'))"
                                   ".map(a => a.innerText);")
    assert names == [shown(payload(hostile.leak.url))] * 2
    _inert(browser, hostile)


def test_the_policy_blocks_and_reports_what_escaping_would_have_let_through(browser: webdriver.Chrome,
                                                                            hostile: Hostile) -> None:
    """The second line of defence, checked on its own: markup put into the page anyway (as an escaping bug
    would) runs nothing and sends nothing, and the browser logs the violations."""
    _open(browser, hostile.url + "/", "#runs-table div.ag-cell a")
    _no_console_errors(browser)
    browser.execute_script("document.querySelector('main').insertAdjacentHTML('beforeend', arguments[0]);"
                           "const s = document.createElement('script'); s.textContent = \"window.__pwned = 'inline'\";"
                           "document.body.appendChild(s);", payload(hostile.leak.url))
    time.sleep(1)
    assert browser.execute_script("return typeof window.__pwned;") == "undefined"
    logs = [e["message"] for e in browser.get_log("browser")]  # type: ignore[no-untyped-call]
    assert any("Content Security Policy" in m for m in logs), logs
    assert hostile.leak.requests == []
