"""The run page of a multi-rank job with a straggler, in headless Chromium: the verdict names the rank and the
per-rank arrival chart is drawn (the real 4-rank gloo job of sample_traces/gloo_4rank/delayed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait
from typer.testing import CliRunner

from gpuscope.cli.main import app as cli
from gpuscope.store import Store
from tests.conftest import SAMPLES
from tests.dashboards.browser import WAIT_S, module_browser
from tests.dashboards.serving import dashboard


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    yield from module_browser()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("stragglers") / "home"
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "gloo_4rank" / "delayed"), "--usd-per-gpu-hour", "2"],
                                env={"GPUSCOPE_HOME": str(home)})
    assert result.exit_code == 0, result.output
    store = Store(home)
    (meta,) = store.list_runs()
    with dashboard(store) as port:
        yield f"http://127.0.0.1:{port}/runs/{meta.id}"
    store.close()


def test_the_straggler_in_the_verdict_and_the_arrival_chart(browser: webdriver.Chrome, page: str) -> None:
    browser.get(page)
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.ID, "verdict-primary")))
    WebDriverWait(browser, WAIT_S).until(lambda d: d.execute_script(
        "return !!document.querySelector('#chart-arrivals .js-plotly-plot svg.main-svg');"))
    verdict = browser.execute_script("return document.querySelector('.verdict').innerText;")
    assert "Rank 2 holds the job back" in verdict
    bars = browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart-arrivals .bars path'))"
        ".map(p => p.style.fill || p.getAttribute('style'));")
    assert len(bars) == 4
    assert sum("214, 39, 40" in str(b) for b in bars) == 1  # the straggler's bar, red (#d62728)
    logs = browser.get_log("browser")  # type: ignore[no-untyped-call]
    assert [e for e in logs if e["level"] == "SEVERE"] == []
