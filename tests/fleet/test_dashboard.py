"""The /fleet page and its figures, over a fleet run saved in a store (data built in code)."""

from __future__ import annotations

import json
from pathlib import Path

import plotly.graph_objects as go
import pytest
from plotly.io.json import to_json_plotly

from gpuscope.dashboards.app import route
from gpuscope.dashboards.data import RunReader
from gpuscope.figures.base import Absent
from gpuscope.figures.fleet import fleet_busy_timeline, group_costs
from gpuscope.fleet import analyze_fleet
from gpuscope.fleet.saved import save_fleet_run
from gpuscope.model.fleet import UTIL
from gpuscope.store import Store
from tests.fleet.test_analysis import NAN, fleet, price


def text(component: object) -> str:
    """All text under a Dash component tree (tables' cells included)."""
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list | tuple):
        return " ".join(text(c) for c in component)
    if isinstance(component, dict):
        return " ".join(text(v) for v in component.values())
    parts = [getattr(component, "children", None), getattr(component, "rowData", None)]
    return " ".join(text(p) for p in parts if p is not None)


@pytest.fixture
def saved(tmp_path: Path) -> tuple[RunReader, str]:
    data = fleet({("node-a", 0, "train-0"): {UTIL: [0.9, 0.8, NAN]},
                  ("node-b", 1, "serve-0"): {UTIL: [0.0, 0.0, 0.0]}})
    report = analyze_fleet(data, prices={"H100": price(4.0)})
    store = Store(tmp_path / "home")
    meta, _ = save_fleet_run(store, data, report)
    return RunReader(store), meta.id


def test_fleet_page_shows_the_saved_run(saved: tuple[RunReader, str]) -> None:
    reader, run_id = saved
    page = text(route(reader, "/fleet", ""))
    assert run_id in page and "ns/serve-0" in page and "Give back 1 idle GPU" in page
    assert text(route(reader, f"/runs/{run_id}", "")) == page  # the runs list links a fleet run to this page


def test_fleet_page_serializes_as_dash_sends_it(saved: tuple[RunReader, str]) -> None:
    reader, run_id = saved
    sent = json.loads(to_json_plotly(route(reader, "/fleet", f"?run={run_id}&group_by=job")))
    assert "fleet-groups" in json.dumps(sent) and "chart-fleet-busy" in json.dumps(sent)


def test_fleet_page_regroups_the_saved_data(saved: tuple[RunReader, str]) -> None:
    reader, run_id = saved
    page = text(route(reader, "/fleet", f"?run={run_id}&group_by=host"))
    assert "By host" in page and "node-b" in page and "ns/serve-0" not in page.split("Idle GPUs")[0]
    assert "--group-by must be one of" in text(route(reader, "/fleet", f"?run={run_id}&group_by=team"))


def test_fleet_page_without_a_fleet_run(tmp_path: Path) -> None:
    reader = RunReader(Store(tmp_path / "empty"))
    assert "No fleet run yet" in text(route(reader, "/fleet", ""))
    missing = text(route(reader, "/fleet", "?run=20261203-000000-abcdef"))
    assert "No fleet run '20261203-000000-abcdef' in this store" in missing


def test_figures() -> None:
    report = analyze_fleet(fleet({("a", 0, "p"): {UTIL: [0.5, NAN, 0.2]}}), prices={"H100": price(2.0)})
    timeline = fleet_busy_timeline(report)
    assert isinstance(timeline, go.Figure)
    assert [None if v != v else v for v in timeline.data[0].y] == [0.5, None, 0.2]
    costs = group_costs(report)
    assert isinstance(costs, go.Figure)
    assert sum(sum(t.x) for t in costs.data) == pytest.approx(report.cost_usd)
    unpriced = analyze_fleet(fleet({("a", 0, "p"): {UTIL: [0.5]}}), prices={"H100": price(None)})
    assert isinstance(group_costs(unpriced), Absent)
