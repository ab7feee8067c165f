"""What every subcommand shares: the consoles, the store, and the one-line error for user mistakes."""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn

import typer

from gpuscope.api.errors import GpuscopeError
from gpuscope.console import SafeConsole
from gpuscope.format import printable
from gpuscope.model.codec import to_json
from gpuscope.model.report import Report
from gpuscope.store import Store, StoreError
from gpuscope.traces import Loaded

stdout = SafeConsole(soft_wrap=False)
stderr = SafeConsole(stderr=True)

EXIT_USAGE = 2


class UserError(GpuscopeError):
    """A mistake or condition the user can fix; printed as one line, exit code 2."""


def fail(message: str, *, code: int = EXIT_USAGE) -> NoReturn:
    print(f"gpuscope: error: {printable(message)}", file=sys.stderr)
    raise SystemExit(code)


def warn(message: str) -> None:
    print(f"gpuscope: warning: {printable(message)}", file=sys.stderr)


def warn_loaded(loaded: Loaded) -> None:
    """What reading traces left out, as every command that reads traces says it (`analyze`, `ops`, `timeline`,
    `gate`, `report`): each rank file skipped, then each warning (events dropped for fields out of range or of the
    wrong type, profiler cycles, rank ids told apart, files that are not regular)."""
    for err in loaded.errors:
        warn(f"skipped {err}")
    for line in loaded.warnings:
        warn(line)


def open_store() -> Store:
    try:
        return Store()
    except StoreError as exc:
        fail(str(exc))


# Analysis options `analyze`, `run` and `attach` share.
JobHoursOption = Annotated[float | None, typer.Option("--job-hours", min=0.0,
                                                     help="Length of the whole job, to project its cost.")]
JobStepsOption = Annotated[int | None, typer.Option("--job-steps", min=0, help="Steps in the whole job.")]
SaveOption = Annotated[bool, typer.Option("--save/--no-save", help="Save the run in the store (GPUSCOPE_HOME).")]
UsdPerGpuHourOption = Annotated[float | None, typer.Option("--usd-per-gpu-hour", min=0.0,
                                                          help="Price per GPU-hour, over the catalog's.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]


def emit(report: Report, *, json_out: bool, saved: bool = False) -> None:
    """The one way a command prints a report: the JSON object on stdout, or the terminal view (and where the run
    was saved)."""
    if json_out:
        write_json(to_json(report))
        return
    from gpuscope.reports.terminal import render  # the terminal view's tables: not for --json

    render(report)
    if saved:
        stderr.print(f"saved as run {report.run.id} (gpuscope show {report.run.id})", style="dim")


def write_json(data: bytes) -> None:
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()
