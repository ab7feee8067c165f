"""What every subcommand shares: the consoles, the store, and the one-line error for user mistakes."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from gpuscope.api.errors import GpuscopeError
from gpuscope.console import PrintableLog, SafeConsole
from gpuscope.format import printable
from gpuscope.model.redact import redact_text
from gpuscope.net.deadline import COMMAND_S, CONNECT_S, READ_S
from gpuscope.store.errors import StoreError

if TYPE_CHECKING:  # a command imports what it uses: these load with the commands that use them
    from gpuscope.model.report import Report
    from gpuscope.store.sqlite import Store
    from gpuscope.traces.loader import Loaded

stdout = SafeConsole(soft_wrap=False)
stderr = SafeConsole(stderr=True)
if logging.lastResort is not None:
    # A library's warning that reaches the terminal through Python's last-resort handler (botocore's, fsspec's: no
    # handler of their own) is masked and made printable as gpuscope's own lines are.
    logging.lastResort.addFilter(PrintableLog())

EXIT_USAGE = 2

DASK_LOGGERS = ("distributed", "tornado", "asyncio")
"""The loggers Dask's client and its event loop write to stderr: a comm closed as the command ends at its deadline
(tasks cancelled, a stream cut short) is logged there with a traceback."""


def quiet_dask() -> None:
    """A command run on Dask says what happened in its own one line: Dask's own loggers (which ``distributed`` sets
    up as it is imported) are kept off its stderr."""
    try:
        import distributed  # noqa: F401 - imported first: importing it sets those loggers' levels from its config
    except ImportError:
        return  # the analysis says in one line that Dask needs the dask extra
    # distributed's config sets levels on children too (``tornado.application: error``): each one is quietened
    known = [name for name in logging.root.manager.loggerDict
             if any(name == root or name.startswith(f"{root}.") for root in DASK_LOGGERS)]
    for name in {*DASK_LOGGERS, *known}:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


class UserError(GpuscopeError):
    """A mistake or condition the user can fix; printed as one line, exit code 2."""


def fail(message: str, *, code: int = EXIT_USAGE) -> NoReturn:
    print(f"gpuscope: error: {printable(redact_text(message))}", file=sys.stderr)
    raise SystemExit(code)


def warn(message: str) -> None:
    print(f"gpuscope: warning: {printable(redact_text(message))}", file=sys.stderr)


def warn_loaded(loaded: Loaded) -> None:
    """What reading traces left out, as every command that reads traces says it (`analyze`, `ops`, `timeline`,
    `gate`, `report`): each rank file skipped, then each warning (events dropped for fields out of range or of the
    wrong type, profiler cycles, rank ids told apart, files that are not regular)."""
    for err in loaded.errors:
        warn(f"skipped {err}")
    for line in loaded.warnings:
        warn(line)


def open_store() -> Store:
    from gpuscope.store.sqlite import Store

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
StepRangeOption = Annotated[str | None, typer.Option(
    "--step-range", metavar="NAME",
    help="The range that marks a step (a record_function, operator or NVTX range name, or the start of one): its "
         "ranges are the steps, where ProfilerStep#N or a serving engine's step ranges (SGLang step[...], vLLM "
         "execute_...) are not what you want. Applies to traces read by this command.")]
TargetMfuOption = Annotated[float | None, typer.Option(
    "--target-mfu", help="The MFU (0..1) the run is held to: the cost prices the gap to it (default: config.toml's "
                         "[efficiency] target_mfu, else 0.4).")]


def check_target_mfu(target_mfu: float | None) -> None:
    """A bad ``--target-mfu`` (or config.toml setting) is one line and exit code 2, before any work starts."""
    from gpuscope.specs import SpecError, resolve_target_mfu

    try:
        resolve_target_mfu(target_mfu)
    except SpecError as exc:
        fail(str(exc))


TimeoutOption = typer.Option(
    None, "--timeout", min=0.001, metavar="SECONDS",
    help=f"One deadline for the whole command's reading (default {COMMAND_S:g} s when a trace is read by URL or "
         f"on --dask; none for local files). Under it, each connection (TLS handshake included) has "
         f"{CONNECT_S:g} s and the server {READ_S:g} s for its first byte and between any two reads; a Dask "
         f"scheduler {CONNECT_S:g} s to connect and answer its handshake, and {READ_S:g} s for each heartbeat.")
"""``--timeout`` of the commands that read traces (a URL, or on Dask): ``gpuscope.net.deadline``'s limits."""


def emit(report: Report, *, json_out: bool, saved: bool = False) -> None:
    """The one way a command prints a report: the JSON object on stdout, or the terminal view (and where the run
    was saved)."""
    if json_out:
        from gpuscope.model.codec import to_json

        write_json(to_json(report))
        return
    from gpuscope.reports.terminal import render  # the terminal view's tables: not for --json

    render(report)
    if saved:
        stderr.print(f"saved as run {report.run.id} (gpuscope show {report.run.id})", style="dim")


def write_json(data: bytes) -> None:
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()
