"""The dashboard's memory page in a real headless Chromium: a real snapshot kept by `gpuscope memory` (its run's own
page) and a real trace run's Memory tab. The timeline is drawn with the peak marked, the makeup at the peak, the
largest allocations with their source lines; names from the recording stay text."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait
from typer.testing import CliRunner

from gpuscope.cli.main import app as cli
from gpuscope.dashboards.app import route
from gpuscope.dashboards.data import RunReader
from gpuscope.store import Store
from tests import memory_builders as mb
from tests import reference
from tests.conftest import SAMPLES
from tests.dashboards.browser import WAIT_S, module_browser
from tests.dashboards.serving import dashboard

SNAPSHOT = SAMPLES / "memory_snapshots" / "cs336_training_step.pickle.gz"
EVIL = '<img src=x onerror="window.__owned=1">forward'


@dataclass(frozen=True)
class Site:
    url: str
    store: Store
    snapshot_id: str
    trace_id: str
    evil_id: str


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    yield from module_browser()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("memory")
    home = tmp / "home"
    evil = mb.write(tmp / "evil.pickle", mb.snapshot([mb.segment(0, 8 * mb.MIB, [])], [[
        mb.action("alloc", 0, mb.MIB, 0, [mb.frame(EVIL, "/work/<b>model</b>.py", 7)])]]))
    for args in (["memory", str(SNAPSHOT), "--gpu", "H100 SXM"], ["memory", str(evil)],
                 ["analyze", str(SAMPLES / "h200" / "pageable_h2d")]):
        result = CliRunner().invoke(cli, args, env={"GPUSCOPE_HOME": str(home)})
        assert result.exit_code == 0, result.output
    store = Store(home)
    runs = {m.name: m.id for m in store.list_runs()}
    with dashboard(store) as port:
        yield Site(f"http://127.0.0.1:{port}", store, runs[SNAPSHOT.name], runs["pageable_h2d"], runs["evil.pickle"])
    store.close()


def _drawn(browser: webdriver.Chrome, chart: str) -> None:
    WebDriverWait(browser, WAIT_S).until(lambda d: d.execute_script(
        f"return !!document.querySelector('#chart-{chart} .js-plotly-plot svg.main-svg');"))


def test_a_snapshot_run_is_its_memory_page(browser: webdriver.Chrome, site: Site) -> None:
    browser.get(f"{site.url}/runs/{site.snapshot_id}")
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.ID, "memory-page")))
    _drawn(browser, "memory-timeline-0-s")
    _drawn(browser, "memory-makeup-0-s")
    peak = reference.snapshot_replay(reference.snapshot(SNAPSHOT))["peak"]
    text = browser.find_element(By.ID, "memory-peak-0-s").text
    assert f"peak allocated {peak / 2**30:.1f} GiB" in text
    marked = browser.execute_script(
        "const g = document.querySelector('#chart-memory-timeline-0-s .js-plotly-plot');"
        "const t = g.data.find(t => t.name === 'peak'); return [t.y[0], t.text[0]];")
    assert marked[0] == pytest.approx(peak / 2**30) and marked[1].startswith("peak ")
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.CSS_SELECTOR, "#memory-at-peak-0-s "
                                                                                           "div.ag-row")))
    table = browser.find_element(By.ID, "memory-at-peak-0-s").text
    assert "step (adapters.py:887)" in table and "optimizer state" in table
    assert "adapters.py:887" in table  # the source line, in the table's "made in" column too
    assert browser.find_element(By.ID, "advice-headroom").text.startswith("Headroom:")
    logs = browser.get_log("browser")  # type: ignore[no-untyped-call]
    assert [e for e in logs if e["level"] == "SEVERE"] == []


def test_a_trace_run_has_a_memory_tab(browser: webdriver.Chrome, site: Site) -> None:
    browser.get(f"{site.url}/runs/{site.trace_id}")
    WebDriverWait(browser, WAIT_S).until(ec.element_to_be_clickable((By.ID, "memory-tab"))).click()
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.ID, "memory-page")))
    _drawn(browser, "memory-timeline-0-0")
    trace = next((SAMPLES / "h200" / "pageable_h2d").glob("*.json.gz"))
    peak = max(e["args"]["Total Allocated"] for e in reference.memory_events(trace, (1,)))
    assert f"peak allocated {peak / 2**30:.1f} GiB" in browser.find_element(By.ID, "memory-peak-0-0").text


def test_names_from_the_snapshot_stay_text(browser: webdriver.Chrome, site: Site) -> None:
    browser.get(f"{site.url}/runs/{site.evil_id}")
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.CSS_SELECTOR, "#memory-at-peak-0-s "
                                                                                           "div.ag-row")))
    assert EVIL in browser.find_element(By.ID, "memory-at-peak-0-s").text
    assert browser.execute_script("return window.__owned === undefined && !document.querySelector('img[src=\"x\"]');")


def test_a_run_without_memory_events_says_so(site: Site, tmp_path_factory: pytest.TempPathFactory) -> None:
    home = tmp_path_factory.mktemp("nomem") / "home"
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "dev" / "mi210_gpu_only.json.gz")],
                                env={"GPUSCOPE_HOME": str(home)})
    assert result.exit_code == 0, result.output
    with Store(home) as store:
        (meta,) = store.list_runs()
        page = str(route(RunReader(store), f"/runs/{meta.id}/memory", ""))
    assert "No GPU memory in this run" in page
