"""Every view shows the step time with its spread and marks the outlier steps (the real checkpoint loop of
sample_traces/cpu_checkpoint_outlier), and every view prints exposed communication and data wait as the one
figure the report holds, with its unit (the 8-rank DLRM job)."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import plotly.graph_objects as go
import pytest
from rich.console import Console

import gpuscope
from gpuscope.dashboards.app import route
from gpuscope.dashboards.data import RunReader
from gpuscope.dashboards.run_page import report_charts
from gpuscope.figures import outlier_names, step_breakdown
from gpuscope.format import ms, pct
from gpuscope.model.report import Report
from gpuscope.reports.html import ReportDocument, render_html
from gpuscope.reports.terminal import sections
from gpuscope.store import Store
from tests.analyzers.bundled import bundled_report
from tests.conftest import SAMPLES

CHECKPOINT = SAMPLES / "cpu_checkpoint_outlier"


@cache
def checkpoint() -> Report:
    return bundled_report("cpu_checkpoint_outlier")


def terminal_text(report: Report, width: int = 200) -> str:
    console = Console(record=True, width=width, color_system=None)
    for part in sections(report):
        console.print(part)
    return console.export_text()


def test_the_terminal_shows_the_spread_and_marks_the_outlier() -> None:
    r = checkpoint()
    assert r.facts is not None
    text = terminal_text(r)
    steps = text[text.index("Steps"):]
    assert f"{ms(r.facts.step_time_us)} per step (mean of all 12 steady steps" in steps
    assert f"median {ms(r.facts.step_time_median_us)}, p90 {ms(r.facts.step_time_p90_us)}" in steps
    assert f"typical step {ms(r.facts.typical_step_us)} without the outlier" in steps  # the other figure, named
    assert "outlier step 18:" in steps and "save_checkpoint (record_function range)" in steps
    # The one rank's panel says the same step time.
    assert f"step {ms(r.ranks[0].step_time_us)} per step, the mean of 12 steady steps" in text
    assert r.ranks[0].step_time_us == r.facts.step_time_us


def test_the_step_chart_marks_the_outlier_and_draws_median_and_p90() -> None:
    r = checkpoint()
    rank = r.ranks[0]
    fig = step_breakdown(rank, outlier_names(r))
    assert isinstance(fig, go.Figure)
    marked = next(t for t in fig.data if t.name == "outlier")
    assert list(marked.x) == ["step 18"]
    lines = sorted(shape.y0 for shape in fig.layout.shapes)
    assert lines == pytest.approx(sorted([(rank.step_time_median_us or 0) / 1000, (rank.step_time_p90_us or 0) / 1000]))


def test_every_view_names_the_window_of_its_figures() -> None:
    """The Steps panel says which figures are over which window, with their lengths; the JSON maps each figure to
    its window; a rank's GPU busy is printed beside its steady window and HTA's idle time beside the whole one, with
    the start-up between them named, so no panel mixes two windows without saying so."""
    r = checkpoint()
    text = " ".join(terminal_text(r).split())
    assert ("windows: step time over the steady window (12 steps, 560.3 ms); stage "
            "shares and the verdict over the typical steps (11, without outlier step 18)") in text
    assert r.windows["facts.step_time_us"] == "steady" and r.windows["stage_shares"] == "typical"
    assert r.windows["ranks[].temporal"] == "whole" and r.windows["ranks[].gpu_busy"] == "steady"
    gpu = bundled_report("h200/pageable_h2d")
    rank = gpu.ranks[0]
    cut = replace(rank, steady_window_us=rank.window_us * 0.6)  # as if start-up took the first 40%
    shown = " ".join(terminal_text(replace(gpu, ranks=(cut,)), width=400).split())
    assert f"GPU busy {pct(rank.gpu_busy)} of the steady window ({ms(cut.steady_window_us)})" in shown
    assert (f"window {ms(rank.window_us)} (whole window; steady window {ms(cut.steady_window_us)} after "
            f"{ms(rank.window_us * 0.4)} of start-up)") in shown
    assert f"GPU idle over the whole window ({ms(rank.window_us)}; HTA's idle breakdown)" in shown
    page = render_html(ReportDocument(report=r))
    assert 'id="step-windows"' in page and "over the typical steps" in page


def test_the_html_report_shows_the_spread_and_lists_the_outlier() -> None:
    r = checkpoint()
    assert r.facts is not None
    page = render_html(ReportDocument(report=r))
    spread = page[page.index('id="step-spread"'):]
    assert f"median {ms(r.facts.step_time_median_us)}" in spread
    listed = page[page.index('id="outlier-steps"'):]
    assert "step 18" in listed[:400] and "save_checkpoint" in listed[:400]


def test_the_dashboard_shows_the_spread_and_marks_the_outlier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))
    saved = gpuscope.analyze(CHECKPOINT, save=True).analysis
    page = route(RunReader(Store(tmp_path / "home")), f"/runs/{saved.run.id}", "")
    text = _text(page)
    assert "step time" in text and "p90" in text
    assert "outlier" in text and "save_checkpoint (record_function range)" in text
    steps = dict(report_charts(saved))["steps"]
    assert isinstance(steps, go.Figure) and any(t.name == "outlier" for t in steps.data)


def _text(component: object) -> str:
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list | tuple):
        return " ".join(_text(c) for c in component)
    children = getattr(component, "children", None)
    return "" if children is None else _text(children)


# One definition of exposed communication: the communication stage's share of the typical step.

def test_exposed_communication_is_one_figure_in_facts_finding_table_and_ranks() -> None:
    r = bundled_report("dlrm_8rank")
    assert r.facts is not None and r.facts.step_time_us is not None
    share = r.stage_shares["communication"]
    assert share is not None and r.facts.exposed_comm_share == share
    # The job's share is the ranks' own shares weighted by their windows: the same statistic, per rank.
    weighted = sum((x.stage_shares or {})["communication"] * x.window_us for x in r.ranks)
    assert weighted / sum(x.window_us for x in r.ranks) == pytest.approx(share, rel=1e-9)
    f = next(f for f in r.findings if f.code == "comm_exposed_high")
    assert f.time_share == share
    assert f.evidence["comm_exposed_per_step_us"] == pytest.approx(share * (r.facts.typical_step_us or 0.0))
    assert "comm_exposed_us" not in f.evidence  # the kernel-minus-compute total of old, another definition
    text = terminal_text(r)
    table = text[text.index("Ranks:"):text.index("Findings")]
    for x in r.ranks:
        row = next(line for line in table.splitlines() if line.split()[:1] == [str(x.rank)])
        assert pct((x.stage_shares or {})["communication"]) in row
    exposed_us = share * (r.facts.typical_step_us or 0.0)
    assert f"communication share {pct(share)}" in text and f"comm exposed per step {ms(exposed_us)}" in text


def test_data_wait_is_one_figure_in_facts_and_finding() -> None:
    r = bundled_report("resnet50_dataloader_bound")
    assert r.facts is not None and r.facts.step_time_us is not None
    share = r.stage_shares["data_loading"]
    assert share is not None and r.facts.data_wait_share == share
    f = next(f for f in r.findings if f.code == "dataloader_share_high")
    assert f.time_share == share and f.evidence["dataloader_share"] == share
    assert f.evidence["data_wait_per_step_us"] == pytest.approx(share * (r.facts.typical_step_us or 0.0))
