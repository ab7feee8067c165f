"""`gpuscope gate CANDIDATE --baseline BASELINE`: fail a CI job on a performance regression, not on noise.

Exit 0: no regression (improvements are reported); 1: a regression, a change for the worse too few steps can test
(unless ``--allow-weak``), or runs that are not runs of one job (``gpuscope.gate.comparable``); 2: a usage or input
error.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import msgspec
import typer

from gpuscope.analyzers import consistency
from gpuscope.analyzers.report import build_report
from gpuscope.api.analysis import analyze_path
from gpuscope.changes import DiffOptions, explain
from gpuscope.cli.common import StepRangeOption, TimeoutOption, fail, open_store, stdout, warn, warn_loaded, write_json
from gpuscope.cli.prices import analysis_options
from gpuscope.gate.benchmark import to_benchmark
from gpuscope.gate.compare import compare
from gpuscope.gate.config import ConfigError, read_config
from gpuscope.gate.junit import to_junit
from gpuscope.gate.markdown import to_markdown
from gpuscope.gate.saved import ReportFileError, is_report, read_report
from gpuscope.gate.terminal import render
from gpuscope.model.codec import to_json
from gpuscope.model.report import Report
from gpuscope.net.deadline import Timeouts
from gpuscope.store import Store, StoreError
from gpuscope.traces import is_url

EXIT_REGRESSION = 1
SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def register(app: typer.Typer) -> None:
    app.command("gate")(gate)


def gate(
    candidate: str = typer.Argument(..., help="A trace file, a directory of rank files (or an fsspec URL of "
                                              "either), a report saved with `gpuscope analyze --json`, or a saved "
                                              "run id."),
    baseline: str | None = typer.Option(None, "--baseline", help="The same kinds of input as CANDIDATE."),
    baseline_from_store: str | None = typer.Option(None, "--baseline-from-store", metavar="NAME",
                                                   help="The latest saved run with this name."),
    config: Path | None = typer.Option(None, "--config", help="Thresholds and settings (TOML; default "
                                                              "./gpuscope-gate.toml when it exists)."),
    junit: Path | None = typer.Option(None, "--junit", help="Write JUnit XML here: one testcase per metric."),
    benchmark_json: Path | None = typer.Option(None, "--benchmark-json",
                                               help="Write github-action-benchmark customSmallerIsBetter JSON here."),
    json_out: bool = typer.Option(False, "--json", help="Print the gate's result as JSON."),
    allow_partial: bool = typer.Option(False, "--allow-partial",
                                       help="When a rank is missing from either run (a rank file that cannot be "
                                            "read, fewer ranks than its world size or than the other run), compare "
                                            "the ranks both runs have instead of failing. Another GPU model or "
                                            "count, another workload, no steady steps or an unknown report schema "
                                            "still fail."),
    allow_weak: bool = typer.Option(False, "--allow-weak",
                                    help="Pass a change for the worse that too few steady steps cannot test "
                                         "(reported as weak) instead of failing with \"profile at least N steady "
                                         "steps\"; the config's `weak = \"pass\"` does the same."),
    timeout_s: float | None = TimeoutOption,
    step_range: StepRangeOption = None,
) -> None:
    """Compare a candidate run with a baseline; exit 1 on a significant regression."""
    if (baseline is None) == (baseline_from_store is None):
        fail("give one of --baseline or --baseline-from-store")
    try:
        settings = read_config(config)
    except ConfigError as exc:
        fail(str(exc))
    if allow_weak:
        settings = msgspec.structs.replace(settings, weak="pass")
    limits = Reading(timeout_s=timeout_s, timeouts=Timeouts.within(timeout_s),  # one deadline for both
                     step_range=step_range)
    base = (_from_store_name(baseline_from_store) if baseline_from_store is not None
            else _report(str(baseline), limits))
    cand = _report(candidate, limits)
    result = compare(base, cand, settings, allow_partial=allow_partial)
    if not result.passed:
        result = replace(result, explanation=explain(base, cand, DiffOptions(config=settings)))
    if json_out:
        write_json(to_json(result))
    else:
        render(result, stdout)
    if junit is not None:
        _write(junit, to_junit(result))
    if benchmark_json is not None:
        _write(benchmark_json, json.dumps(to_benchmark(result, prefix=settings.benchmark_prefix), indent=2).encode())
    summary = os.environ.get(SUMMARY_ENV)
    if summary:
        _append(Path(summary), to_markdown(result))
    if not result.passed:
        raise typer.Exit(EXIT_REGRESSION)


@dataclass(frozen=True)
class Reading:
    """How long the gate's traces may take to read: ``--timeout``, and the one deadline both inputs share."""

    timeout_s: float | None
    timeouts: Timeouts
    step_range: str | None = None
    """``--step-range``: the range that marks a step in the traces read."""


def _report(arg: str, limits: Reading) -> Report:
    """The report of a path or URL (a saved report, or traces analysed now) or of a saved run id."""
    if is_url(arg):
        return _analyse(arg, limits)
    path = Path(arg)
    if path.exists():
        return _saved_report(path) if is_report(path) else _analyse(path, limits)
    with open_store() as store:
        try:
            run_id = store.resolve(arg)
        except StoreError as exc:
            fail(f"{arg}: no such file or directory, and {exc}")
        return _run_report(store, run_id)


def _from_store_name(name: str) -> Report:
    with open_store() as store:
        listing = store.listing()
        if listing.problems:  # the newest run of that name may be among those that cannot be read: fail closed
            fail(listing.problems[0])
        meta = next((m for m in listing.runs if m.name == name and m.status not in ("running", "failed")), None)
        if meta is None:
            fail(f"no saved run named {name!r} in {store.home} (see `gpuscope runs`)")
        return _run_report(store, meta.id)


def _run_report(store: Store, run_id: str) -> Report:
    report = store.load_report(run_id)
    if report is not None:
        return consistency.enforce(report)  # checked as a fresh one is: a failed check fails the gate
    run = store.load_run(run_id)
    if not run.traces and run.samples is None and run.stacks is None:
        fail(f"run {run_id} has no recorded data to analyse")
    report = build_report(run, analysis_options(run.meta, usd_per_gpu_hour=None, job_hours=None, job_steps=None))
    store.save_report(run_id, report)
    return report


def _saved_report(path: Path) -> Report:
    try:
        return read_report(path)
    except ReportFileError as exc:
        fail(str(exc))


def _analyse(path: Path | str, limits: Reading) -> Report:
    """Traces analysed as `gpuscope analyze` does (rank files that cannot be read are named in the report)."""

    report, _ = analyze_path(path, on_loaded=warn_loaded, timeout_s=limits.timeout_s, timeouts=limits.timeouts,
                             step_range=limits.step_range)
    return report


def _write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data if data.endswith(b"\n") else data + b"\n")
    except OSError as exc:
        fail(f"{path}: cannot be written: {exc.strerror}")


def _append(path: Path, text: str) -> None:
    try:
        with path.open("a", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError as exc:  # the job summary is a courtesy: the gate's verdict and exit status stand
        warn(f"{path} (${SUMMARY_ENV}): cannot be written: {exc.strerror}")
