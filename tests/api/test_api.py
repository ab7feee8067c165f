"""The Python API: the same numbers as `gpuscope analyze --json`, pandas views of them, saved runs, live recording,
and one exception type with the CLI's one-line messages."""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import gpuscope
from gpuscope.api import GpuscopeError, Report
from gpuscope.format import money_frame, usd
from gpuscope.model.run import RunMeta
from gpuscope.store import Store
from tests.cli.helpers import gpuscope as gpuscope_cli
from tests.conftest import SAMPLES
from tests.payloads import ParsedHtml, hostile_report, payload, shown

RESNET = SAMPLES / "resnet50_dataloader_bound"
DLRM = SAMPLES / "dlrm_8rank"


@functools.cache
def _cli_json(path: Path, *args: str) -> dict[str, Any]:
    """`gpuscope analyze PATH --json` in a subprocess, once per arguments for the whole module."""
    with tempfile.TemporaryDirectory() as home:
        result = gpuscope_cli("analyze", str(path), "--json", "--no-save", *args, home=Path(home))
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _without_run_id(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "run": {k: v for k, v in doc["run"].items() if k != "id"}}


@pytest.mark.parametrize(("path", "args", "kwargs"), [
    (RESNET, (), {}),
    (DLRM, ("--usd-per-gpu-hour", "2.5", "--job-hours", "10"), {"usd_per_gpu_hour": 2.5, "job_hours": 10.0}),
], ids=["resnet50", "dlrm_8rank_priced"])
def test_analyze_gives_the_numbers_of_the_cli(gpuscope_home: Path, path: Path, args: tuple[str, ...],
                                              kwargs: dict[str, Any]) -> None:
    report = gpuscope.analyze(path, **kwargs)
    cli = _cli_json(path, *args)
    assert _without_run_id(json.loads(report.to_json())) == _without_run_id(cli)
    assert report.to_dict()["verdict"] == cli["verdict"]
    assert report.verdict.primary == cli["verdict"]["primary"]
    assert [f.code for f in report.findings] == [f["code"] for f in cli["findings"]]
    assert [r.code for r in report.recommendations] == [r["code"] for r in cli["recommendations"]]
    assert report.cost is not None and report.cost.total_usd == cli["cost"]["total_usd"]
    assert not gpuscope_home.exists()  # the API saves only when asked


@pytest.mark.parametrize("path", [RESNET, DLRM], ids=["6_steps", "8_ranks"])
def test_steps_frame_holds_every_rank_and_step_of_the_cli_json(path: Path) -> None:
    cli = _cli_json(path)
    steps = gpuscope.analyze(path).steps_frame()
    expected = [(r["rank"], s["name"], s["duration_us"], *s["breakdown_us"].values(), s["warmup"])
                for r in cli["ranks"] for s in r["per_step"]]
    assert len(steps) == len(expected) > 1
    parts = [f"{k}_us" for k in cli["ranks"][0]["per_step"][0]["breakdown_us"]]
    got = list(steps[["rank", "step", "duration_us", *parts, "warmup"]].itertuples(index=False, name=None))
    assert got == expected
    busy = [s["gpu_busy"] for r in cli["ranks"] for s in r["per_step"]]
    assert steps["gpu_busy"].tolist() == pytest.approx([b if b is not None else float("nan") for b in busy],
                                                       nan_ok=True)
    assert steps["warmup"].dtype == bool and steps["rank"].dtype == "int64"


def test_a_trace_without_profiler_steps_has_no_step_rows_but_the_same_columns() -> None:
    with_steps = gpuscope.analyze(RESNET).steps_frame()
    report = gpuscope.analyze(SAMPLES / "torch_compile_cpu")
    assert report.ranks and not any(r.per_step for r in report.ranks)
    steps = report.steps_frame()
    assert steps.empty
    assert steps.dtypes.to_dict() == with_steps.dtypes.to_dict()


def test_kernels_frame_holds_each_ranks_top_kernels() -> None:
    cli = _cli_json(RESNET)
    kernels = gpuscope.analyze(RESNET).kernels_frame()
    top = cli["ranks"][0]["top_kernels"]
    assert kernels["name"].tolist() == [k["name"] for k in top]
    assert kernels["total_us"].tolist() == [k["total_us"] for k in top]
    assert kernels["share"].sum() <= 1.0 + 1e-9
    assert set(kernels["category"]) <= {"compute", "communication", "memory"}


def test_a_trace_run_has_an_empty_typed_samples_frame() -> None:
    samples = gpuscope.analyze(RESNET).samples_frame()
    assert samples.empty
    assert list(samples.columns) == ["ts_ns", "source", "gpu", "pid", "metric", "value"]
    assert samples["ts_ns"].dtype == "int64" and samples["value"].dtype == "float64"


def test_saved_runs_are_listed_and_load_back_the_same(gpuscope_home: Path) -> None:
    first = gpuscope.analyze(RESNET, save=True, name="resnet")
    second = gpuscope.analyze(DLRM, save=True)
    listed = gpuscope.runs()
    assert {r.id for r in listed} == {first.run.id, second.run.id}
    assert [r.name for r in listed if r.id == first.run.id] == ["resnet"]
    loaded = gpuscope.load(first.run.id[:-2])
    assert loaded.to_json() == first.to_json()
    again = gpuscope.load(second.run.id, reanalyze=True)
    assert _without_run_id(again.to_dict()) == _without_run_id(second.to_dict())
    shown = gpuscope_cli("show", first.run.id, "--json", home=gpuscope_home)
    assert json.loads(shown.stdout) == loaded.to_dict()


def test_user_errors_raise_one_type_with_the_cli_line(gpuscope_home: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(GpuscopeError) as err:
        gpuscope.analyze(missing)
    cli = gpuscope_cli("analyze", str(missing), home=gpuscope_home)
    assert cli.stderr.strip() == f"gpuscope: error: {err.value}"
    assert "\n" not in str(err.value)
    with pytest.raises(GpuscopeError, match="no run with id"):
        gpuscope.load("nosuchrun")
    with Store() as store:
        for kind in ("fleet", "attach"):
            store.create_run(RunMeta(id=f"{kind}-run", name=kind, kind=kind, status="complete", started_ns=1))
    with pytest.raises(GpuscopeError, match="is a fleet run"):
        gpuscope.load("fleet-run")
    with pytest.raises(GpuscopeError, match="no recorded data"):
        gpuscope.load("attach-run")
    with pytest.raises(GpuscopeError, match="not both or neither"):
        gpuscope.record()
    with pytest.raises(GpuscopeError, match="must be 0 or more"):
        gpuscope.analyze(RESNET, job_hours=-1.0)
    monkeypatch.setenv("GPUSCOPE_USD_PER_GPU_HOUR", "cheap")
    with pytest.raises(GpuscopeError) as bad_price:
        gpuscope.analyze(RESNET)
    assert "GPUSCOPE_USD_PER_GPU_HOUR" in str(bad_price.value)
    with pytest.raises(GpuscopeError):  # told before any sampling starts
        gpuscope.record(command=[sys.executable, "-c", "pass"], save=False)


def test_record_runs_a_command_through_the_run_recorder(gpuscope_home: Path) -> None:
    report = gpuscope.record(command=[sys.executable, "-c", "import time; time.sleep(1)"], interval_s=0.05,
                             stacks=False, name="a nap")
    assert report.run.kind == "run" and report.run.name == "a nap"
    assert report.run.status == "target_exited"
    samples = report.samples_frame()
    assert {"proc.cpu_cores", "host.cpu"} <= set(samples["metric"])
    assert samples["ts_ns"].is_monotonic_increasing
    assert report.live is not None and report.steps_frame().empty
    loaded = gpuscope.load(report.run.id)
    pd.testing.assert_frame_equal(loaded.samples_frame(), samples)
    assert loaded.to_json() == report.to_json()
    page = report._repr_html_()
    assert 'class="gpuscope-report"' in page and "<script" not in page
    assert html.escape(report.verdict.summary or "No verdict", quote=True).split(":")[0] in page


def test_record_attaches_to_a_pid_for_a_duration(gpuscope_home: Path) -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        report = gpuscope.record(pid=target.pid, duration_s=0.5, interval_s=0.1, stacks=False, save=False)
    finally:
        target.kill()
        target.wait()
    assert report.run.kind == "attach" and report.run.status == "complete"
    assert not report.samples_frame().empty
    assert not gpuscope_home.exists() or gpuscope.runs() == []
    with pytest.raises(GpuscopeError, match=f"no process with pid {target.pid}"):
        gpuscope.record(pid=target.pid, duration_s=0.1, save=False)


def test_without_plotly_a_report_shows_its_verdict_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    report = gpuscope.analyze(RESNET)
    monkeypatch.setitem(sys.modules, "gpuscope.api.display", None)  # as if plotly could not be imported
    assert report._repr_html_() == f"<p>{html.escape(report.verdict.summary)}</p>"


def test_the_notebook_view_is_small_offline_html_with_verdict_cost_and_chart() -> None:
    report = gpuscope.analyze(RESNET)
    page = report._repr_html_()
    assert report.verdict.summary and report.verdict.summary.split(":")[0] in page
    assert report.recommendations[0].title in page
    assert 'id="kpi-cost"' in page and "DataLoader" in page and 'class="bar"' in page
    assert "<script" not in page and "http" not in page
    assert len(page.encode()) < 20_000
    assert "report.recommendations" in page  # the HTML report's section name does not apply here
    assert repr(report).startswith("<gpuscope.Report trace run ")
    assert isinstance(report, Report)


def test_without_steps_the_chart_is_where_the_cost_went() -> None:
    traced = gpuscope.analyze(RESNET, name="<img src=x onerror=alert(1)>")
    assert traced.cost is not None and traced.cost.total_usd
    page = Report(dataclasses.replace(traced.analysis, ranks=()))._repr_html_()
    frame = money_frame(traced.cost)  # a trace of seconds is framed per hour, in plain dollars
    title = f"Where the {usd(traced.cost.total_usd * frame.factor)} {frame.label} went"
    assert "step went" not in page and html.escape(title) in page
    assert "input-starved" in page  # the waste figure's own label for data loading
    assert "<img" not in page and "&lt;img src=x" in page


def test_the_notebook_view_shows_hostile_names_as_text() -> None:
    """Every free-text string of the report carries script, onerror, link, template, markup and escape-sequence
    payloads: the notebook's HTML holds only the view's own tags and attributes, and each payload as text."""
    shown_html = Report(hostile_report(payload()))._repr_html_()
    assert shown_html.count("<style") == 1 and "<script" not in shown_html and "<img" not in shown_html
    page = ParsedHtml()
    page.feed(shown_html)
    assert page.tags <= {"div", "style", "p", "code", "section", "h2", "h3", "strong", "span", "ol", "li", "i",
                         "table", "thead", "tbody", "tr", "th", "td"}
    assert page.attributes <= {"class", "id", "style", "title", "role", "aria-label"}
    text = "".join(page.text)
    for part in ("resnet <b>bold</b>", "Use more DataLoader workers", "The GPU waits for data."):
        assert f"{shown(payload())} {part}" in text, part


def test_import_gpuscope_stays_light_and_the_api_is_there_on_use() -> None:
    probe = ("import sys, gpuscope; light = not {'pandas', 'plotly', 'gpuscope.api'} & set(sys.modules); "
             "print(light, gpuscope.analyze.__module__, gpuscope.Report is gpuscope.api.Report)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["True", "gpuscope.api.analysis", "True"], result.stderr
    with pytest.raises(AttributeError):
        gpuscope.no_such_name  # noqa: B018
