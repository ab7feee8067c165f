"""A CPU job on the dashboard's pages: no GPU count, GPU time or price (server side, no browser)."""

from __future__ import annotations

from pathlib import Path

import gpuscope
from gpuscope.dashboards.app import route
from gpuscope.dashboards.data import RunReader
from gpuscope.dashboards.runs_list import row
from gpuscope.store import Store
from tests.conftest import SAMPLES
from tests.dashboards.test_app import _text


def test_a_cpu_only_gloo_job_shows_no_gpu_count_time_or_price(gpuscope_home: Path) -> None:
    run_id = gpuscope.analyze(SAMPLES / "cpu_gloo_ddp", save=True).run.id
    with Store(gpuscope_home) as store:
        page = _text(route(RunReader(store), f"/runs/{run_id}", ""))
        listed = row(store.get_meta(run_id), None, 0)
    assert "CPU only" in page and listed["gpus"] == "CPU only"
    for words in ("GPU-s", "GPU-h", "unknown GPU", "GPUs n/a", "$"):
        assert words not in page, words
