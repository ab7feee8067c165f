"""`gpuscope run [options] -- CMD ...`: launch a command, sample it live, report, exit with its exit code.

The command gets ``GPUSCOPE_RUN_ID`` and ``GPUSCOPE_HOME`` in its environment, so
``gpuscope.torch.profile()`` inside it writes its Kineto trace into this run's folder and the
report joins the trace with the live samples.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import typer

from gpuscope.api.launch import forwarding_signals, readable_forks, run_store, wait_for
from gpuscope.cli.attach import (
    DEFAULT_STACK_INTERVAL_S,
    DcgmOption,
    IntervalOption,
    LiveOptions,
    NoStacksOption,
    ServingOption,
    StackIntervalOption,
    check_dcgm,
    check_serving,
    print_report,
    record_live,
)
from gpuscope.cli.common import (
    EXIT_USAGE,
    JobHoursOption,
    JobStepsOption,
    SaveOption,
    TargetMfuOption,
    UsdPerGpuHourOption,
    check_target_mfu,
    fail,
    stderr,
)
from gpuscope.collectors.sampler import DEFAULT_INTERVAL_S
from gpuscope.store import StoreError, new_run_id
from gpuscope.torch import HOME_ENV, RUN_ID_ENV


def register(app: typer.Typer) -> None:
    app.command("run", context_settings={"allow_interspersed_args": False})(run)


def run(
    command: list[str] = typer.Argument(None, metavar="-- CMD [ARGS]...", help="The command to launch and follow."),
    duration: float | None = typer.Option(None, "--duration", min=0.0,
                                          help="Seconds to sample (default: until the command exits or Ctrl-C)."),
    interval: IntervalOption = DEFAULT_INTERVAL_S,
    stack_interval: StackIntervalOption = DEFAULT_STACK_INTERVAL_S,
    no_stacks: NoStacksOption = False,
    dcgm: DcgmOption = None,
    serving_metrics: ServingOption = None,
    name: str | None = typer.Option(None, "--name", help="Name of the saved run (default: the script)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout (after the"
                                  " command's own output)."),
    usd_per_gpu_hour: UsdPerGpuHourOption = None,
    job_hours: JobHoursOption = None,
    job_steps: JobStepsOption = None,
    target_mfu: TargetMfuOption = None,
    save: SaveOption = True,
) -> None:
    """Launch a command (a training script), sample it live, print its report, exit with its exit code."""
    if not command:
        fail("give the command to run after `--`, e.g. gpuscope run -- python train.py")
    options = LiveOptions(duration_s=duration, interval_s=interval, stack_interval_s=stack_interval,
                          stacks=not no_stacks, dcgm_url=dcgm, name=name, json_out=json_out,
                          usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps, save=save,
                          target_mfu=target_mfu, serving_url=serving_metrics)
    check_target_mfu(target_mfu)
    check_dcgm(dcgm)  # before the launch: a wrong endpoint is told without starting the command
    check_serving(serving_metrics)
    with run_store(save=save) as store, readable_forks(os.environ, stacks=not no_stacks) as base_env:
        store.check_writable("the run")  # before the command starts, not after it has run unrecorded
        run_id = new_run_id()
        env = {**base_env, RUN_ID_ENV: run_id, HOME_ENV: str(store.home.resolve())}
        started_ns = time.time_ns()
        try:
            child = subprocess.Popen(command, env=env)
        except OSError as exc:
            fail(f"cannot run {command[0]!r}: {exc.strerror or exc}")
        # Until the command ends: SIGTERM and SIGINT passed on to it, and the Yama hook's folder kept for the
        # Python processes it starts after sampling stopped.
        with forwarding_signals(child):
            # A process just exec'd may not have its interpreter mapped yet: no py-spy probe here,
            # the stack sampler retries a few ticks before calling a pid not Python.
            try:
                report = record_live(store, pid=child.pid, kind="run", command=tuple(command), options=options,
                                     run_id=run_id, alive=lambda: child.poll() is None, probe_stacks=False,
                                     started_ns=started_ns)
            except StoreError as exc:  # the store took no more: the command still runs, and is waited for
                print(f"gpuscope: error: {exc}", file=sys.stderr)
                code = wait_for(child, note=lambda line: stderr.print(line, style="dim"))
                raise typer.Exit(code or EXIT_USAGE) from None
            print_report(report, options)
            code = wait_for(child, note=lambda line: stderr.print(line, style="dim"))
    raise typer.Exit(code)
