"""`gpuscope analyze PATH`: profiler traces in, verdict, breakdowns, cost and advice out; saved as a run."""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import typer

from gpuscope.analyzers.report import build_report
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.cli.common import fail, open_store, stderr, warn, write_json
from gpuscope.cli.prices import analysis_options
from gpuscope.model.codec import to_json
from gpuscope.model.run import GpuInfo, Run, RunMeta
from gpuscope.model.trace import GPU_KINDS, RankTrace
from gpuscope.reports.terminal import render
from gpuscope.store import new_run_id
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
    if not loaded.traces:
        fail(f"{path}: none of the {len(loaded.files)} trace files could be read")
    meta = trace_run_meta(loaded.traces, name=name or path.resolve().name)
    options = analysis_options(meta, usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps,
                               samples_per_step=samples_per_step)
    if options.price is not None:
        meta = replace(meta, price_source=options.price.source)
    run = Run(meta=meta, traces=loaded.traces)
    report = build_report(run, options, warnings=(*(f"skipped {e}" for e in loaded.errors), *loaded.warnings),
                          ranks=loaded.per_rank or None)
    if job_steps is not None and not any(r.steps for r in report.ranks):
        fail(f"{path}: --job-steps needs profiler steps (ProfilerStep#N) and this trace has none; "
             "project the cost with --job-hours instead")
    if save:
        with open_store() as store:
            store.create_run(meta)
            store.save_traces(meta.id, run.traces)
            store.save_report(meta.id, report)
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


def trace_run_meta(traces: tuple[RankTrace, ...], *, name: str) -> RunMeta:
    """A trace run's catalog entry: its time span and the GPUs its ranks ran work on (one per rank in most jobs)."""
    starts = [int(t.events.ts_ns.min()) for t in traces if len(t.events)]
    ends = [int(t.events.end_ns.max()) for t in traces if len(t.events)]
    started = min(starts) if starts else time.time_ns()
    return RunMeta(
        id=new_run_id(started), name=name, kind="trace", status="complete", started_ns=started,
        ended_ns=max(ends) if ends else started, host=socket.gethostname(),
        command=tuple(t.source for t in traces), gpus=tuple(g for t in traces for g in _rank_gpus(t)),
    )


def _rank_gpus(trace: RankTrace) -> tuple[GpuInfo, ...]:
    """Each device the rank ran GPU work on, as its deviceProperties entry where the trace has one."""
    ev = trace.events
    used = np.unique(ev.device[ev.mask(*GPU_KINDS) & (ev.device >= 0)]).tolist()
    if len(used) <= 1:
        gpu = trace.main_gpu()
        if gpu is not None:
            return (gpu,)
        index = trace.main_device
        return (GpuInfo(index=index if index is not None else trace.rank),)
    listed = {g.index: g for g in trace.gpus}
    return tuple(listed.get(d, GpuInfo(index=d)) for d in used)

