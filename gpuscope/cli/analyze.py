"""`gpuscope analyze PATH`: profiler traces in, verdict, breakdowns, cost and advice out; saved as a run."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.api.analysis import analyze_loaded
from gpuscope.cli.common import fail, stderr, warn, write_json
from gpuscope.model.codec import to_json
from gpuscope.reports.terminal import render
from gpuscope.traces import Loaded, load

PROGRESS_MIN_BYTES = 64 * 1024 * 1024


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze)


def analyze(
    path: Path = typer.Argument(..., help="A trace file (.json, .json.gz) or a directory of rank files."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
    name: str | None = typer.Option(None, "--name", help="Name of the saved run (default: the path's name)."),
    strict: bool = typer.Option(False, "--strict", help="Fail if any rank file cannot be read."),
    save: bool = typer.Option(True, "--save/--no-save", help="Save the run in the store (GPUSCOPE_HOME)."),
    usd_per_gpu_hour: float | None = typer.Option(None, "--usd-per-gpu-hour", min=0.0,
                                                  help="Price per GPU-hour, over the catalog's."),
    job_hours: float | None = typer.Option(None, "--job-hours", min=0.0,
                                           help="Length of the whole job, to project its cost."),
    job_steps: int | None = typer.Option(None, "--job-steps", min=0, help="Steps in the whole job."),
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
    if json_out:
        write_json(to_json(report))
    else:
        render(report)
        if save:
            stderr.print(f"[dim]saved as run {meta.id} (gpuscope show {meta.id})[/dim]")


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
