"""The dashboard's serving view in a real headless Chromium: a trace run's phases and graph replays (a real SGLang
trace with its capture trace), a recorded server's tokens and cost per token, and the fleet's serving pods from a
real Prometheus; charts draw, tables fill, a kernel name from a trace stays text, no console errors."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.support.ui import WebDriverWait

from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.analyzers.serving.report import ENGINE_TAG, URL_TAG
from gpuscope.api.analysis import analyze_path
from gpuscope.fleet import Prometheus, analyze_fleet, fetch_fleet, plan_window
from gpuscope.fleet.pricing import fleet_prices
from gpuscope.fleet.saved import save_fleet_run
from gpuscope.model import schema as S
from gpuscope.model.cost import Price
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import RunMeta
from gpuscope.store import Store
from tests.builders import cpu_op, kernel, launch, trace, write
from tests.dashboards.browser import WAIT_S, module_browser
from tests.dashboards.serving import dashboard
from tests.dashboards.test_browser import _charts, _grid_rows, _no_console_errors, _open, _screenshot, _text
from tests.payloads import payload, shown
from tests.serving.conftest import STEP_S, ServingFleet

ROOT = Path(__file__).resolve().parents[2] / "sample_traces"


@dataclass(frozen=True)
class Site:
    url: str
    trace_id: str
    tricky_id: str
    live_id: str


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    yield from module_browser()


def _live_run(store: Store) -> str:
    """A recorded server: 2,000 output tokens a second over 3 s on one GPU at $7.20 an hour."""
    meta = store.create_run(RunMeta(id="20261205-000000-serve0", name="vllm server", kind="attach", status="complete",
                                    started_ns=0, ended_ns=3 * 10**9, gpus=(GpuInfo(index=0, name="H100"),),
                                    tags={URL_TAG: "http://127.0.0.1:8000/metrics", ENGINE_TAG: "vllm"}))
    rows = [(i * 10**9, S.SERVING, S.NO_GPU, S.NO_PID, S.SERVING_OUTPUT_TOKENS, 2000.0 * i) for i in range(4)]
    rows += [(i * 10**9, S.NVML, 0, S.NO_PID, S.GPU_UTIL, 0.5) for i in range(4)]
    store.add_samples(meta.id, rows)
    run = store.load_run(meta.id)
    report = build_report(run, AnalysisOptions(price=Price(usd_per_gpu_hour=7.2, source="test")))
    store.save_report(meta.id, report)
    return meta.id


@pytest.fixture(scope="module")
def site(serving_fleet: ServingFleet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("serving-dash")
    store = Store(folder / "home")
    _, meta = analyze_path(ROOT / "serving" / "sglang_qwen3_8b_extend_decode.json.gz", save=True, store=store,
                           jobs=1, capture_traces=[ROOT / "dev" / "sglang_decode_cudagraph_bs32.json.gz"])
    tricky = [cpu_op("step[DECODE bs=2]", 0, 500, cat="user_annotation"), launch(5, 10, 7, name="cudaGraphLaunch"),
              kernel(payload(), 20, 100, 7), kernel("paged_attention_v1_kernel", 130, 100, 7)]
    _, tricky_meta = analyze_path(write(folder / "tricky.json", trace(tricky)), save=True, store=store, jobs=1)
    data = fetch_fleet(Prometheus(serving_fleet.url), plan_window(serving_fleet.start_s, serving_fleet.end_s, STEP_S))
    save_fleet_run(store, data, analyze_fleet(data, prices=fleet_prices(data, 3.6)))
    live_id = _live_run(store)
    with dashboard(store) as port:
        yield Site(f"http://127.0.0.1:{port}", meta.id, tricky_meta.id, live_id)
    store.close()


def test_a_serving_traces_phases_and_graph_replays(browser: webdriver.Chrome, site: Site) -> None:
    _open(browser, f"{site.url}/runs/{site.trace_id}", "#serving-phases div.ag-row")
    WebDriverWait(browser, WAIT_S).until(lambda d: d.execute_script("return !!document.querySelector("
                                                                "'#serving-graphs div.ag-row');"))
    assert "chart-serving-phases" in _charts(browser, 1)
    phases = _text(browser, "#serving-phases") or ""
    assert "prefill" in phases and "decode" in phases
    graphs = _text(browser, "#serving-graphs") or ""
    assert "capture_32_DECODE" in graphs and "aten::mm" in graphs
    _no_console_errors(browser)
    _screenshot(browser, "serving_trace")


def test_a_kernel_name_from_a_trace_stays_text(browser: webdriver.Chrome, site: Site) -> None:
    _open(browser, f"{site.url}/runs/{site.tricky_id}", "#serving-graphs div.ag-row")
    assert shown(payload())[:40] in (_text(browser, "#serving-graphs") or "")
    state = browser.execute_script("return [typeof window.__pwned, document.querySelectorAll("
                                   "'#serving-graphs img, #serving-graphs iframe, [onerror]').length];")
    assert state == ["undefined", 0]
    _no_console_errors(browser)


def test_a_recorded_servers_cost_per_million_tokens(browser: webdriver.Chrome, site: Site) -> None:
    _open(browser, f"{site.url}/runs/{site.live_id}", "#serving-metrics")
    metrics = _text(browser, "#serving-metrics") or ""
    # $7.20 an hour is $0.002 a second; at 2,000 tokens a second a million cost $1.00
    assert "2,000 tok/s" in metrics and "$ per million output tokens\t$1.00" in metrics
    assert "vllm · http://127.0.0.1:8000/metrics" in metrics
    _no_console_errors(browser)


def test_the_fleets_serving_pods(browser: webdriver.Chrome, site: Site) -> None:
    _open(browser, f"{site.url}/fleet", "#fleet-serving div.ag-row")
    assert "chart-fleet-serving-cost" in _charts(browser, 3)
    pods = {row["pod"]: row for row in _grid_rows(browser, "#fleet-serving")}
    assert {f"serving/{p}" for p in ("vllm-0", "sglang-0", "tgi-0", "vllm-kv-0")} <= set(pods)
    vllm = pods["serving/vllm-0"]
    assert vllm["engine"] == "vllm" and float(vllm["$/M output"].lstrip("$")) == pytest.approx(1.0, rel=0.1)
    _no_console_errors(browser)
    _screenshot(browser, "serving_fleet")


