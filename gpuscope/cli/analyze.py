"""`gpuscope analyze PATH`: profiler traces in, verdict, breakdowns, cost and advice out; saved as a run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuscope.cli.common import (
    JobHoursOption,
    JobStepsOption,
    JsonOption,
    SaveOption,
    StepRangeOption,
    TargetMfuOption,
    TimeoutOption,
    UsdPerGpuHourOption,
    check_target_mfu,
    emit,
    fail,
    quiet_dask,
    stderr,
    warn,
    warn_loaded,
)
from gpuscope.traces.location import is_url

if TYPE_CHECKING:
    from gpuscope.traces.loader import Loaded
    from gpuscope.traces.location import SourceFile

PROGRESS_MIN_BYTES = 64 * 1024 * 1024


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze)


def analyze(
    path: str = typer.Argument(..., help="A trace file (.json, .json.gz), an Nsight Systems profile (.sqlite export, "
                                         ".nsys-rep) or a directory of them; or an fsspec URL of either (s3://, "
                                         "gs://, az://, https://), read where it is."),
    json_out: JsonOption = False,
    name: str | None = typer.Option(None, "--name", help="Name of the saved run (default: the path's name)."),
    strict: bool = typer.Option(False, "--strict", help="Fail if any rank file cannot be read."),
    save: SaveOption = True,
    usd_per_gpu_hour: UsdPerGpuHourOption = None,
    job_hours: JobHoursOption = None,
    job_steps: JobStepsOption = None,
    samples_per_step: int | None = typer.Option(None, "--samples-per-step", min=1,
                                                help="Samples (or served requests) per step, for the cost per 1,000."),
    target_mfu: TargetMfuOption = None,
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1,
                                    help="Processes reading trace files (a large one is read in parts)."),
    dask: str | None = typer.Option(None, "--dask", metavar="ADDRESS",
                                    help="Run the per-rank work on this Dask scheduler (tcp://host:8786)."),
    new_run: bool = typer.Option(False, "--new-run",
                                 help="Save a new run even when this trace was analysed before (by default its "
                                      "saved run is updated)."),
    capture_trace: list[str] = typer.Option([], "--capture-trace", metavar="PATH",
                                            help="A trace of the serving engine's CUDA/HIP graph capture: its graph "
                                                 "replays' GPU time goes to the operators that captured them "
                                                 "(repeatable)."),
    timeout_s: float | None = TimeoutOption,
    step_range: StepRangeOption = None,
) -> None:
    """Analyse PyTorch profiler (Kineto) traces or Nsight Systems profiles: one file or a directory of ranks."""
    check_target_mfu(target_mfu)  # before the traces are read: a typo costs no minutes
    from gpuscope.api.analysis import analyze_path  # the reader and the analyzers: not for `analyze --help`

    if dask is not None:
        quiet_dask()

    def loaded(done: Loaded) -> None:
        warn_loaded(done)
        if done.errors and strict:
            fail(f"{len(done.errors)} of {len(done.files)} trace files could not be read (--strict)")

    with _progress(path, quiet=json_out, always=dask is not None) as on_progress:
        report, _ = analyze_path(path, name=name, usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours,
                                 job_steps=job_steps, samples_per_step=samples_per_step, save=save, jobs=jobs,
                                 dask=dask, on_progress=on_progress, on_loaded=loaded, new_run=new_run,
                                 target_mfu=target_mfu, capture_traces=capture_trace, timeout_s=timeout_s,
                                 on_note=warn, step_range=step_range)
    emit(report, json_out=json_out, saved=save)


@contextmanager
def _progress(path: str, *, quiet: bool, always: bool) -> Iterator[Callable[[SourceFile], None] | None]:
    """A bar of the bytes read, on a terminal, for a large local path or any run on a cluster (advanced as each
    rank finishes)."""
    total = 0 if is_url(path) else _local_bytes(Path(path))
    if quiet or not stderr.is_terminal or (not always and total < PROGRESS_MIN_BYTES):
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    columns = ("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=stderr, transient=True) as progress:
        task = progress.add_task("analysing ranks", total=total or None)

        def advance(source: SourceFile) -> None:
            progress.advance(task, source.size_bytes)

        yield advance


def _local_bytes(path: Path) -> int:
    try:
        return sum(p.stat().st_size for p in ([path] if path.is_file() else path.iterdir()) if p.is_file()) \
            if path.exists() else 0
    except OSError:
        return 0
