"""Every view of a diff leads with its caveats: the report's "What changed" section and the dashboard's compare
page, for a V100 run against an H200 one (another GPU model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.api.analysis import analyze_path
from gpuscope.dashboards.compare_page import layout
from gpuscope.dashboards.data import RunReader
from gpuscope.store import Store
from tests.conftest import SAMPLES
from tests.reports.test_html_runs import invoke

V100, H200 = SAMPLES / "resnet50_workers4", SAMPLES / "h200" / "resnet50_workers12"
CAVEAT = "caveat: the baseline ran on Tesla V100-DGXS-32GB and the candidate on NVIDIA H200"


def _text(component: object) -> str:
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list | tuple):
        return " ".join(_text(c) for c in component)
    children = getattr(component, "children", None)
    return "" if children is None else _text(children)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    home = tmp_path_factory.mktemp("home")
    with Store(home) as store:
        ids = [analyze_path(p, name=p.name, save=True, store=store)[1].id for p in (V100, H200)]
    return home, ids[0], ids[1]


def test_the_reports_what_changed_leads_with_the_caveat(runs: tuple[Path, str, str], tmp_path: Path) -> None:
    home, v100, h200 = runs
    out = tmp_path / "compare.html"
    invoke(home, "report", h200, "--compare", v100, "-o", str(out))
    page = out.read_text(encoding="utf-8")
    section = page[page.index('id="what-changed"'):]
    assert CAVEAT in section and section.index(CAVEAT) < section.index('id="diff-headline"')


def test_the_dashboards_compare_page_leads_with_the_caveat(runs: tuple[Path, str, str]) -> None:
    home, v100, h200 = runs
    with Store(home) as store:
        text = _text(layout(RunReader(store), f"?a={v100}&b={h200}"))
    assert CAVEAT in text and text.index(CAVEAT) < text.index("the step got")
