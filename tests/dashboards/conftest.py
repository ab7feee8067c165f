"""A real store with real runs, the dashboard served on loopback, and one headless Chromium for the module."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from selenium import webdriver
from typer.testing import CliRunner

from gpuscope.cli.main import app as cli
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.report import RunSummary
from gpuscope.model.run import RunMeta
from gpuscope.store import Store
from tests.conftest import SAMPLES
from tests.dashboards.browser import module_browser
from tests.dashboards.serving import dashboard
from tests.figures.fixtures import STACKS, T0_NS, empty_report, full_report, sample_rows, stack_rows

SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
LIVE_ID = "20261202-100000-11aa22"
EMPTY_ID = "20261202-090000-33bb44"
TRICKY_NAME = '<img src=x onerror="alert(1)"> [x](javascript:alert(1)) **bold**'


@dataclass(frozen=True)
class Served:
    url: str
    store: Store
    trace_id: str
    before_id: str = ""
    """resnet50_workers4: the run the trace run's change is explained against on the compare page."""


def build_store(home: Path) -> tuple[Store, str]:
    """A store holding two analysed sample traces (the num_workers=0 ResNet and the same job with 4 workers), a
    live attach run with samples and stacks, and an empty run."""
    for sample in ("resnet50_dataloader_bound", "resnet50_workers4"):
        result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / sample)], env={"GPUSCOPE_HOME": str(home)})
        assert result.exit_code == 0, result.output
    store = Store(home)
    trace_id = next(m.id for m in store.list_runs() if m.name == "resnet50_dataloader_bound")
    gpus = tuple(GpuInfo(index=i, name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 2**30) for i in range(2))
    live_t0 = time.time_ns() - 300 * 10**9
    store.create_run(RunMeta(id=LIVE_ID, name=TRICKY_NAME, kind="attach", status="running", started_ns=live_t0,
                             pid=4242, command=("python", "train.py", "--lr", "0.1"), gpus=gpus))
    store.add_samples(LIVE_ID, sample_rows(gpus=2, seconds=300, t0_ns=live_t0))
    store.add_stacks(LIVE_ID, stack_rows(t0_ns=live_t0), dict(STACKS))
    report = full_report(LIVE_ID, name=TRICKY_NAME)
    store.save_report(LIVE_ID, replace(report, run=replace(report.run, kind="attach", status="running")))
    store.create_run(RunMeta(id=EMPTY_ID, name="nothing yet", kind="attach", status="complete",
                             started_ns=T0_NS - 10**12, ended_ns=T0_NS))
    store.save_report(EMPTY_ID, replace(empty_report(EMPTY_ID), run=RunSummary(id=EMPTY_ID, kind="attach")))
    return store, trace_id


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    """A headless Chromium for a module's browser tests (tests/dashboards/browser.py)."""
    yield from module_browser()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    store, trace_id = build_store(tmp_path_factory.mktemp("dash") / "home")
    before_id = next(m.id for m in store.list_runs() if m.name == "resnet50_workers4")
    with dashboard(store) as port:
        yield Served(url=f"http://127.0.0.1:{port}", store=store, trace_id=trace_id, before_id=before_id)
    store.close()
