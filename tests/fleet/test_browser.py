"""The /fleet page in a real headless Chromium: charts draw, tables fill, regrouping works, no console errors."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from gpuscope.fleet import analyze_fleet
from gpuscope.fleet.saved import save_fleet_run
from gpuscope.model.fleet import MEMORY_USED_BYTES, POWER_W, UTIL
from gpuscope.store import Store
from tests.dashboards.browser import WAIT_S, module_browser
from tests.dashboards.serving import dashboard
from tests.dashboards.test_browser import _charts, _no_console_errors, _open, _screenshot, _text
from tests.fleet.test_analysis import NAN, fleet, price
from tests.payloads import payload, shown

SECRET = "pr0m-pa55"


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    yield from module_browser()


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    rows = {("node-a", 0, "train-0"): {UTIL: [0.9, 0.8, NAN, 0.85], POWER_W: [600.0] * 4,
                                       MEMORY_USED_BYTES: [60e9] * 4},
            ("node-b", 1, "serve-0"): {UTIL: [0.0, 0.0, 0.0, 0.0], POWER_W: [70.0] * 4},
            ("node-b", 2, "<b>tricky</b>"): {UTIL: [0.2, 0.1, 0.15, 0.2]},
            (f"{payload()} node-c", 3, payload()): {UTIL: [0.6, 0.5, 0.55, 0.6]}}
    data = replace(fleet(rows), prometheus_url=f"https://alice:{SECRET}@prom.example:9090")
    store = Store(tmp_path_factory.mktemp("fleet-dash") / "home")
    save_fleet_run(store, data, analyze_fleet(data, prices={"H100": price(6.88)}))
    with dashboard(store) as port:
        yield f"http://127.0.0.1:{port}"
    store.close()


def test_fleet_page_draws(browser: webdriver.Chrome, url: str) -> None:
    _open(browser, url + "/fleet", "#fleet-groups div.ag-row")
    assert set(_charts(browser, 2)) == {"chart-fleet-busy", "chart-fleet-costs"}
    groups = _text(browser, "#fleet-groups") or ""
    assert "ns/serve-0" in groups and "ns/<b>tricky</b>" in groups  # a user string stays text
    assert f"ns/{shown(payload())}" in groups
    assert "https://***@prom.example:9090" in (_text(browser, "#fleet-totals") or "")
    assert SECRET not in browser.page_source
    state = browser.execute_script("return [typeof window.__pwned, document.querySelectorAll("
                                   "'img, iframe, svg[onload], [onerror], main script, main style').length];")
    assert state == ["undefined", 0]
    assert "Give back 1 idle GPU" in (_text(browser, "#fleet-advice") or "")
    browser.find_element(By.ID, "group-by-host").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: "node-b" in (_text(d, "#fleet-groups") or ""))
    assert browser.current_url.endswith("group_by=host")
    assert f"{shown(payload())} node-c" in (_text(browser, "#fleet-groups") or "")
    _no_console_errors(browser)
    _screenshot(browser, "fleet")
