"""The dashboard in a real headless Chromium: pages load, charts render, no console errors, user strings stay text."""

from __future__ import annotations

import re
import time

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from tests.dashboards.browser import WAIT_S
from tests.dashboards.conftest import EMPTY_ID, LIVE_ID, SCREENSHOTS, TRICKY_NAME, Served


def _open(browser: webdriver.Chrome, url: str, ready_css: str) -> None:
    browser.get(url)
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.CSS_SELECTOR, ready_css)))


# Pages of running runs re-render every few seconds, so an element found a moment ago may be gone:
# every read below is one script run in the page (atomic), never a held element reference.
def _text(browser: webdriver.Chrome, css: str) -> str | None:
    text = browser.execute_script("const e = document.querySelector(arguments[0]); return e ? e.innerText : null;",
                                  css)
    return None if text is None else str(text)


def _count(browser: webdriver.Chrome, css: str) -> int:
    return int(browser.execute_script("return document.querySelectorAll(arguments[0]).length;", css))


def _all(browser: webdriver.Chrome, css: str, attribute: str) -> list[str]:
    return list(browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(e => e[arguments[1]]);", css, attribute))


def _grid_rows(browser: webdriver.Chrome, css: str) -> list[dict[str, str]]:
    """The rows an AG Grid table (``css``) shows, in its order (AG Grid places rows by ``row-index``, not in DOM
    order): each row's cells' text by column id."""
    return list(browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' div.ag-center-cols-container div.ag-row'))"
        ".sort((a, b) => a.getAttribute('row-index') - b.getAttribute('row-index'))"
        ".map(r => Object.fromEntries(Array.from(r.querySelectorAll('div.ag-cell'))"
        ".map(c => [c.getAttribute('col-id'), c.innerText])));", css))


def _drawn(browser: webdriver.Chrome) -> list[str]:
    """Ids of the Dash graphs whose plotly chart has drawn its svg (plotly draws two svgs per chart)."""
    return list(browser.execute_script(
        "return Array.from(document.querySelectorAll('div.dash-graph'))"
        ".filter(g => g.querySelector('.js-plotly-plot svg.main-svg')).map(g => g.id);"))


def _charts(browser: webdriver.Chrome, count: int) -> list[str]:
    """Wait until ``count`` plotly charts have drawn; their element ids."""
    WebDriverWait(browser, WAIT_S).until(lambda d: len(_drawn(d)) >= count)
    return _drawn(browser)


def _no_console_errors(browser: webdriver.Chrome) -> None:
    logs = browser.get_log("browser")  # type: ignore[no-untyped-call]
    severe = [entry for entry in logs if entry["level"] == "SEVERE"]
    assert severe == []


def _screenshot(browser: webdriver.Chrome, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, min(max(int(height) + 40, 800), 6000))
    time.sleep(0.3)
    browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    browser.set_window_size(1400, 1000)


def test_runs_list(browser: webdriver.Chrome, served: Served) -> None:
    _open(browser, served.url + "/", "#runs-table div.ag-row")
    links = dict(zip(_all(browser, "#runs-table div.ag-cell a", "innerText"),
                     _all(browser, "#runs-table div.ag-cell a", "href"), strict=True))
    assert links[TRICKY_NAME].endswith(f"/runs/{LIVE_ID}")
    assert links["nothing yet"].endswith(f"/runs/{EMPTY_ID}")
    assert any(h.endswith(f"/runs/{served.trace_id}") for h in links.values())
    assert _count(browser, "#runs-table img") == 0  # the run name stayed text
    text = _text(browser, "#runs-table") or ""
    assert "data loading (I/O)" in text and "running" in text
    totals = {row["total_usd"] for row in _grid_rows(browser, "#runs-table")}
    assert {"$6", "n/a"} <= totals and "$0.00" not in totals  # the trace run costs a fraction of a cent
    assert all(re.fullmatch(r"n/a|\$[\d,]+(\.\d+)?", t) for t in totals)
    _screenshot(browser, "runs_list")
    # A number column sorts as numbers (as text, "1000.000" would come before "302.4..."), and back.
    header = "#runs-table .ag-header-cell[col-id=duration_s] .ag-header-cell-label"
    browser.find_element(By.CSS_SELECTOR, header).click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _grid_rows(d, "#runs-table")[0]["duration_s"] == "0.847")
    durations = [float(r["duration_s"]) for r in _grid_rows(browser, "#runs-table")]
    assert durations == sorted(durations) and len(durations) == 4
    browser.find_element(By.CSS_SELECTOR, header).click()
    WebDriverWait(browser, WAIT_S).until(lambda d: _grid_rows(d, "#runs-table")[-1]["duration_s"] == "0.847")
    # A number typed in a number column's filter keeps the rows equal to it.
    browser.find_element(By.CSS_SELECTOR, "#runs-table .ag-floating-filter[col-id=duration_s] input").send_keys("1000")
    WebDriverWait(browser, WAIT_S).until(lambda d: [r["name"] for r in _grid_rows(d, "#runs-table")] == ["nothing yet"])
    _no_console_errors(browser)


def test_runs_list_filters_and_links_two_runs_to_compare(browser: webdriver.Chrome, served: Served) -> None:
    _open(browser, served.url + "/", "#runs-table div.ag-row")
    kind_filter = browser.find_element(By.CSS_SELECTOR, "#runs-table .ag-floating-filter[col-id=kind] input")
    kind_filter.send_keys("attach" + Keys.ENTER)
    WebDriverWait(browser, WAIT_S).until(lambda d: [r["kind"] for r in _grid_rows(d, "#runs-table")] == ["attach"] * 2)
    browser.execute_script("document.querySelectorAll('#runs-table div.ag-row input[type=checkbox]')"
                           ".forEach(b => b.click());")
    WebDriverWait(browser, WAIT_S).until(lambda d: "a=" in (_all(d, "#compare-link", "href") or [""])[0])
    href = _all(browser, "#compare-link", "href")[0]
    assert href.endswith(f"/compare?a={EMPTY_ID}&b={LIVE_ID}")
    _no_console_errors(browser)


def test_trace_run_page(browser: webdriver.Chrome, served: Served) -> None:
    _open(browser, f"{served.url}/runs/{served.trace_id}", "#run-name")
    graphs = _charts(browser, 2)
    assert "chart-steps" in graphs and "chart-kernels" in graphs
    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.ID, "absent-charts")))
    absent = _text(browser, "#absent-charts") or ""
    assert "GPU timelines: no live samples" in absent and "Ranks compared: one rank only" in absent
    assert _text(browser, "#run-name") == "resnet50_dataloader_bound"
    _screenshot(browser, "run_trace")
    _no_console_errors(browser)


def test_live_run_page_draws_every_chart(browser: webdriver.Chrome, served: Served) -> None:
    _open(browser, f"{served.url}/runs/{LIVE_ID}", "#run-name")
    graphs = _charts(browser, 7)
    assert {"chart-steps", "chart-ranks", "chart-kernels", "chart-gpu", "chart-host", "chart-stacks",
            "chart-waste"} <= set(graphs)
    assert _text(browser, "#run-name") == TRICKY_NAME
    assert _count(browser, "main img") == 0
    assert _text(browser, "#verdict-primary") == "data loading"
    cost = _text(browser, "#cost-card") or ""
    assert "This run\t$6.00" in cost and "Per 1,000 samples\tn/a" in cost
    recommendations = _text(browser, "#recommendations") or ""
    assert "Use more DataLoader workers" in recommendations and "<script>x</script>" in recommendations
    assert _count(browser, "#live-note") == 1
    assert _count(browser, "#absent-charts") == 0  # every chart has its data
    _screenshot(browser, "run_live")
    _no_console_errors(browser)


def test_empty_run_page_says_what_is_missing(browser: webdriver.Chrome, served: Served) -> None:
    _open(browser, f"{served.url}/runs/{EMPTY_ID}", "#absent-charts")
    text = _text(browser, "main") or ""
    assert "No verdict" in text and "no cost for this run" in text
    assert _count(browser, ".js-plotly-plot") == 0
    _no_console_errors(browser)


def test_compare_page(browser: webdriver.Chrome, served: Served) -> None:
    _open(browser, f"{served.url}/compare?a={served.trace_id}&b={LIVE_ID}", "#deltas")
    _charts(browser, 1)
    deltas = _text(browser, "#deltas") or ""
    assert "Step time (mean)" in deltas and "Cost per step" in deltas and "data loading (I/O)" in deltas
    _screenshot(browser, "compare")
    _no_console_errors(browser)


def test_compare_page_draws_the_change_as_a_waterfall(browser: webdriver.Chrome, served: Served) -> None:
    _open(browser, f"{served.url}/compare?a={served.before_id}&b={served.trace_id}", "#diff-headline")
    assert "chart-waterfall" in _charts(browser, 2)
    headline = _text(browser, "#diff-headline") or ""
    # Each run's step time: the mean of its six steady steps.
    assert headline.startswith("the step got 36.5 ms slower (141.1 ms -> 177.6 ms, beyond noise)")
    # The drawn figure's own data: baseline and candidate steps, and the changes between that add up.
    x, y, measure = browser.execute_script(
        "const t = document.querySelector('#chart-waterfall .js-plotly-plot').data[0];"
        "return [Array.from(t.x), Array.from(t.y), Array.from(t.measure)];")
    assert measure[0] == "absolute" and measure[-1] == "total" and x[1] == "data wait"
    assert y[0] + sum(y[1:-1]) == pytest.approx(y[-1]) and y[1] > 0.7 * (y[-1] - y[0])
    assert _count(browser, "#chart-waterfall .waterfalllayer .point path") == len(x)  # every bar drawn
    _screenshot(browser, "compare_waterfall")
    _no_console_errors(browser)


@pytest.mark.parametrize(("path", "message"), [
    ("/runs/..%2F..%2Fetc%2Fpasswd", "that is not a run id"),
    ("/runs/20991231-000000-ffffff", "no run with id 20991231-000000-ffffff"),
    ("/compare?a=x%27%3B--&b=1", "Cannot compare: that is not a run id"),
    ("/nowhere", "no such page"),
])
def test_bad_urls_get_one_line(browser: webdriver.Chrome, served: Served, path: str, message: str) -> None:
    _open(browser, served.url + path, "main .absent")
    assert message in (_text(browser, "main .absent") or "")
    _no_console_errors(browser)


def test_live_run_page_refreshes_itself(browser: webdriver.Chrome, served: Served) -> None:
    _open(browser, f"{served.url}/runs/{LIVE_ID}", "#live-note")
    _charts(browser, 7)
    started_ns = served.store.get_meta(LIVE_ID).started_ns
    served.store.update_run(LIVE_ID, status="complete", ended_ns=started_ns + 300 * 10**9)
    WebDriverWait(browser, WAIT_S).until(lambda d: _count(d, "#live-note") == 0)
    assert "complete" in (_text(browser, ".badge") or "")
    assert "duration 5m 00s" in (_text(browser, "p.meta") or "")
    _no_console_errors(browser)


def test_the_menu_reaches_every_page(browser: webdriver.Chrome, served: Served) -> None:
    """From a run's page (the deepest), each page of ``PAGES`` is one click on the menu away, and it loads."""
    from gpuscope.dashboards.app import PAGES

    _open(browser, f"{served.url}/runs/{served.trace_id}", "#run-name")
    hrefs = _all(browser, "nav a:not(.brand)", "href")
    assert [h.removeprefix(served.url) for h in hrefs] == [p.path for p in PAGES]
    assert "Fleet" in (_text(browser, "nav") or "")
    for page in PAGES:
        browser.find_element(By.CSS_SELECTOR, f"nav a[href='{page.path}']:not(.brand)").click()
        WebDriverWait(browser, WAIT_S).until(lambda d, p=page.path: d.current_url == served.url + p)
        WebDriverWait(browser, WAIT_S).until(lambda d: _count(d, "#page h1") == 1 and _count(d, "#run-name") == 0)
        assert _count(browser, "#not-found") == 0, page.path
    _no_console_errors(browser)
