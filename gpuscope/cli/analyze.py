"""`gpuscope analyze PATH`: profiler traces in, verdict, breakdowns, cost and advice out; saved as a run."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.api.analysis import analyze_loaded
from gpuscope.cli.common import (
    JobHoursOption,
    JobStepsOption,
    JsonOption,
    SaveOption,
    UsdPerGpuHourOption,
    emit,
    fail,
    stderr,
    warn,
)
from gpuscope.traces import Loaded, load

PROGRESS_MIN_BYTES = 64 * 1024 * 1024


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze)


def analyze(
    path: Path = typer.Argument(..., help="A trace file (.json, .json.gz) or a directory of rank files."),
    json_out: JsonOption = False,
    name: str | None = typer.Option(None, "--name", help="Name of the saved run (default: the path's name)."),
    strict: bool = typer.Option(False, "--strict", help="Fail if any rank file cannot be read."),
    save: SaveOption = True,
    usd_per_gpu_hour: UsdPerGpuHourOption = None,
    job_hours: JobHoursOption = None,
    job_steps: JobStepsOption = None,
    samples_per_step: int | None = typer.Option(None, "--samples-per-step", min=1,
                                                help="Samples (or served requests) per step, for the cost per 1,000."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help="Processes reading rank files."),
) -> None:
    """Analyse PyTorch profiler (Kineto) traces: one rank or a directory of ranks."""
    loaded = _load(path, jobs=jobs, quiet=json_out)
    for err in loaded.errors:
        warn(f"skipped {err}")
    for line in loaded.warnings:
        warn(line)
    if loaded.errors and strict:
        fail(f"{len(loaded.errors)} of {len(loaded.files)} trace files could not be read (--strict)")
    report, meta = analyze_loaded(loaded, path, name=name, usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours,
                                  job_steps=job_steps, samples_per_step=samples_per_step, save=save)
    emit(report, json_out=json_out, saved=save)


def _load(path: Path, *, jobs: int | None, quiet: bool) -> Loaded:
    try:
        total = sum(p.stat().st_size for p in ([path] if path.is_file() else path.iterdir())
                    if p.is_file()) if path.exists() else 0
    except OSError:
        total = 0
    if quiet or total < PROGRESS_MIN_BYTES or not stderr.is_terminal:
        return load(path, jobs=jobs, per_rank=analyze_rank)
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    columns = ("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=stderr, transient=True) as progress:
        task = progress.add_task("reading traces", total=total)
        return load(path, jobs=jobs, on_progress=lambda _f, size: progress.advance(task, size), per_rank=analyze_rank)
