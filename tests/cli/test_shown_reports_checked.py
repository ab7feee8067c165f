"""A report read back from the store is checked as a fresh one is, in every view that shows it: `gpuscope show`,
`gpuscope report`, the dashboard and `gpuscope.load`. The saved report here carries a contradiction an older
version could have saved (advice promising more than its stage takes): each view withdraws the advice and names
the failed check, never prints both claims."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import gpuscope
from gpuscope.api.analysis import analyze_path
from gpuscope.dashboards.data import RunReader
from gpuscope.model.diagnosis import Recommendation
from gpuscope.model.report import Report
from gpuscope.store import Store
from tests.cli.helpers import gpuscope as run_cli
from tests.conftest import SAMPLES

TITLE = "Capture the whole step in one CUDA graph"
CHECK = "check savings_vs_waste"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store with one run whose saved report promises a saving 20 points past its stage's share."""
    home = tmp_path_factory.mktemp("home")
    with Store(home) as store:
        report, meta = analyze_path(SAMPLES / "resnet50_workers4", name="workers4", save=True, store=store)
        share = report.stage_shares["host_overhead"]
        assert share is not None
        bad = Recommendation(code="cuda_graphs", title=TITLE, detail="d", est_step_saving=share + 0.2,
                             stage="host_overhead")
        store.save_report(meta.id, replace(report, recommendations=(bad, *report.recommendations)))
    return home, meta.id


def withdrawn(report: Report) -> None:
    assert all(r.title != TITLE for r in report.recommendations) and report.recommendations
    assert report.failed_checks == ("savings_vs_waste",) and any(CHECK in w for w in report.warnings)


def test_the_store_keeps_what_was_saved(saved: tuple[Path, str]) -> None:
    home, run_id = saved
    with Store(home) as store:
        report = store.load_report(run_id)
    assert report is not None and report.recommendations[0].title == TITLE and report.failed_checks == ()


def test_show_json_and_terminal(saved: tuple[Path, str]) -> None:
    home, run_id = saved
    shown = run_cli("show", run_id, "--json", home=home)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["failed_checks"] == ["savings_vs_waste"] and all(r["title"] != TITLE for r in doc["recommendations"])
    terminal = run_cli("show", run_id, home=home, COLUMNS="200")
    # The advice is named once: in the warning that says it was withdrawn, never as advice.
    assert terminal.returncode == 0 and CHECK in terminal.stdout and terminal.stdout.count(TITLE) == 1


def test_the_html_report(saved: tuple[Path, str], tmp_path: Path) -> None:
    home, run_id = saved
    out = tmp_path / "r.html"
    result = run_cli("report", run_id, "--output", str(out), home=home)
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    assert CHECK in page and page.count(TITLE) == 1


def test_the_dashboard_and_the_python_api(saved: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    home, run_id = saved
    with Store(home) as store:
        shown = RunReader(store).report(run_id)
    assert shown is not None
    withdrawn(shown)
    monkeypatch.setenv("GPUSCOPE_HOME", str(home))
    withdrawn(gpuscope.load(run_id).analysis)
