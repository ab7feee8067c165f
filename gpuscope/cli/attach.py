"""`gpuscope attach PID`: sample a running process tree live, save the run, print the report.

The recording itself is the API's (``gpuscope.api.recording.record_live``), shared with `gpuscope run` and
``gpuscope.record``; the command line adds the live terminal view, its warnings and the printed report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Annotated, Any

import psutil
import typer
from rich.live import Live

from gpuscope.api import recording
from gpuscope.api.errors import GpuscopeError
from gpuscope.api.launch import run_store
from gpuscope.api.recording import DEFAULT_STACK_INTERVAL_S, LiveOptions
from gpuscope.cli.common import (
    JobHoursOption,
    JobStepsOption,
    SaveOption,
    TargetMfuOption,
    UsdPerGpuHourOption,
    check_target_mfu,
    emit,
    fail,
    stderr,
    warn,
)
from gpuscope.cli.live_view import LiveView
from gpuscope.collectors.host import HostSampler
from gpuscope.collectors.sampler import DEFAULT_INTERVAL_S, Tick
from gpuscope.model.report import Report
from gpuscope.model.run import RunKind
from gpuscope.store import Store

__all__ = ["DEFAULT_STACK_INTERVAL_S", "LiveOptions", "ServingOption", "check_dcgm", "check_serving", "print_report",
           "record_live", "terminal_view"]

# Options `attach` and `run` share.
IntervalOption = Annotated[float, typer.Option("--interval", min=0.01, help="Seconds between samples.")]
StackIntervalOption = Annotated[float, typer.Option("--stack-interval", min=0.01,
                                                    help="Seconds between Python stack dumps (py-spy).")]
NoStacksOption = Annotated[bool, typer.Option("--no-stacks", help="Do not take Python stacks with py-spy.")]
DcgmOption = Annotated[str | None, typer.Option("--dcgm", help="dcgm-exporter endpoint, e.g. gpu-node:9400"
                                                " (default: localhost:9400 when it answers).")]
ServingOption = Annotated[str | None, typer.Option("--serving-metrics", help="The inference server's metrics "
                                                   "endpoint (vLLM, SGLang --enable-metrics, TGI), e.g. "
                                                   "localhost:8000: tokens/s, queue, KV cache, latency, $ per "
                                                   "million tokens.")]


def register(app: typer.Typer) -> None:
    app.command("attach")(attach)


def attach(
    pid: int = typer.Argument(..., help="The process to follow (its child processes are followed too)."),
    duration: float | None = typer.Option(None, "--duration", min=0.0,
                                          help="Seconds to sample (default: until Ctrl-C or the process exits)."),
    interval: IntervalOption = DEFAULT_INTERVAL_S,
    stack_interval: StackIntervalOption = DEFAULT_STACK_INTERVAL_S,
    no_stacks: NoStacksOption = False,
    dcgm: DcgmOption = None,
    serving_metrics: ServingOption = None,
    name: str | None = typer.Option(None, "--name", help="Name of the saved run (default: the command)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
    usd_per_gpu_hour: UsdPerGpuHourOption = None,
    job_hours: JobHoursOption = None,
    job_steps: JobStepsOption = None,
    target_mfu: TargetMfuOption = None,
    save: SaveOption = True,
) -> None:
    """Sample a running training or inference process live, then print its report."""
    try:
        proc = psutil.Process(pid)
        command = tuple(proc.cmdline()) or (proc.name(),)
    except psutil.NoSuchProcess:
        fail(f"no process with pid {pid}")
    except psutil.AccessDenied:
        command = ()
    options = LiveOptions(duration_s=duration, interval_s=interval, stack_interval_s=stack_interval,
                          stacks=not no_stacks, dcgm_url=dcgm, name=name, json_out=json_out,
                          usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps, save=save,
                          target_mfu=target_mfu, serving_url=serving_metrics)
    check_target_mfu(target_mfu)
    check_dcgm(dcgm)
    check_serving(serving_metrics)
    with run_store(save=save) as store:
        report = record_live(store, pid=pid, kind="attach", command=command, options=options)
    print_report(report, options)


def check_dcgm(url: str | None) -> None:
    """``--dcgm URL`` must give DCGM samples now: one line and exit 2 before anything is recorded or launched."""
    try:
        recording.check_dcgm(url)
    except GpuscopeError as exc:
        fail(str(exc))


def check_serving(url: str | None) -> None:
    """``--serving-metrics URL`` must answer with a serving engine's metrics now: one line and exit 2 otherwise."""
    try:
        recording.check_serving(url)
    except GpuscopeError as exc:
        fail(str(exc))


@contextmanager
def terminal_view(host: HostSampler, kind: RunKind, pid: int) -> Iterator[Callable[[Tick], None]]:
    """The live view on stderr while a recording runs (nothing drawn when stderr is not a terminal)."""
    view = LiveView(title=f"gpuscope {kind} · pid {pid}", pid=pid, trainers=host.trainers)
    live: Any = (Live(view, console=stderr, refresh_per_second=4, transient=True) if stderr.is_terminal
                 else nullcontext())
    with live:
        yield view.update


def record_live(store: Store, *, pid: int, kind: RunKind, command: tuple[str, ...], options: LiveOptions,
                **kwargs: Any) -> Report:
    """The API's recording with the terminal's view, warnings and notes."""
    return recording.record_live(store, pid=pid, kind=kind, command=command, options=options, view=terminal_view,
                                 warn=warn, note=lambda line: stderr.print(line, style="dim"), **kwargs)


def print_report(report: Report, options: LiveOptions) -> None:
    emit(report, json_out=options.json_out, saved=options.save)
