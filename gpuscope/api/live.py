"""Live recording through the Python API: ``record`` follows a running process or runs a command, as
``gpuscope attach`` and ``gpuscope run`` do, with the same collectors, sampling loop and analysis."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import psutil

from gpuscope.api.analysis import options_for, user_errors
from gpuscope.api.errors import GpuscopeError
from gpuscope.api.launch import forwarding_signals, readable_forks, run_store, wait_for
from gpuscope.api.recording import DEFAULT_STACK_INTERVAL_S, LiveOptions, check_dcgm, check_serving, record_live
from gpuscope.api.report import Report
from gpuscope.collectors.sampler import DEFAULT_INTERVAL_S
from gpuscope.model.run import RunMeta
from gpuscope.store import Store, new_run_id
from gpuscope.torch import HOME_ENV, RUN_ID_ENV

if TYPE_CHECKING:
    import pandas as pd


def record(pid: int | None = None, command: Sequence[str] | None = None, duration_s: float | None = None, *,
           interval_s: float = DEFAULT_INTERVAL_S, stack_interval_s: float = DEFAULT_STACK_INTERVAL_S,
           stacks: bool = True, dcgm_url: str | None = None, name: str | None = None,
           usd_per_gpu_hour: float | None = None, job_hours: float | None = None, job_steps: int | None = None,
           save: bool = True, target_mfu: float | None = None, serving_url: str | None = None) -> Report:
    """Sample a process tree live (NVML, dcgm-exporter, host counters, py-spy stacks, whichever work here)
    and return its report with the samples.

    Give ``pid`` to follow a running process (``gpuscope attach PID``) or ``command`` to launch one
    (``gpuscope run -- CMD``; it gets ``GPUSCOPE_RUN_ID``, so ``gpuscope.torch.profile()`` inside it adds its
    trace to the run). Sampling stops after ``duration_s``, at Ctrl-C, or when the process exits; a launched
    command is then waited for. With ``save=False`` nothing stays in the store.
    Raises ``GpuscopeError`` for a bad combination, a missing process or command, a bad setting, or a
    ``dcgm_url`` that gives no DCGM samples at the start (later outages are gaps in the recording).
    ``serving_url``: an inference server's metrics endpoint (vLLM, SGLang, TGI), whose tokens, load and latency
    the report prices at the run's GPU cost (``Report.serving``); checked at the start like ``dcgm_url``.
    """
    if (pid is None) == (command is None):
        raise GpuscopeError("give pid (a running process) or command (one to launch), not both or neither")
    for label, value in (("duration_s", duration_s), ("interval_s", interval_s),
                         ("stack_interval_s", stack_interval_s)):
        if value is not None and value <= 0:
            raise GpuscopeError(f"{label} must be more than 0, not {value}")
    # A bad price setting is told before sampling, not after it.
    options_for(RunMeta(id="", name="", kind="run", status="running", started_ns=0),
                usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps, target_mfu=target_mfu)
    check_dcgm(dcgm_url)
    check_serving(serving_url)
    options = LiveOptions(duration_s=duration_s, interval_s=interval_s, stack_interval_s=stack_interval_s,
                          stacks=stacks, dcgm_url=dcgm_url, name=name, json_out=True,
                          usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps, save=save,
                          target_mfu=target_mfu, serving_url=serving_url)
    try:
        with user_errors(), run_store(save=save) as store:
            if pid is not None:
                return _attach(store, pid, options)
            return _launch(store, list(command or ()), options)
    except SystemExit as exc:  # the shared recording code ends a user error with its one line on stderr
        raise GpuscopeError(f"recording stopped (exit status {exc.code}); the reason is printed above") from None


def _attach(store: Store, pid: int, options: LiveOptions) -> Report:
    try:
        proc = psutil.Process(pid)
        command = tuple(proc.cmdline()) or (proc.name(),)
    except psutil.NoSuchProcess:
        raise GpuscopeError(f"no process with pid {pid}") from None
    except psutil.AccessDenied:
        command = ()
    analysis = record_live(store, pid=pid, kind="attach", command=command, options=options)
    return Report(analysis, samples=_samples(store, analysis.run.id))


def _launch(store: Store, command: list[str], options: LiveOptions) -> Report:
    if not command:
        raise GpuscopeError("command is empty: give the program and its arguments, e.g. ['python', 'train.py']")
    store.check_writable("the run")  # before the command starts, not after it has run unrecorded
    with readable_forks(os.environ, stacks=options.stacks) as base_env:
        run_id = new_run_id()
        env = {**base_env, RUN_ID_ENV: run_id, HOME_ENV: str(store.home.resolve())}
        started_ns = time.time_ns()
        try:
            child = subprocess.Popen(command, env=env)
        except OSError as exc:
            raise GpuscopeError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
        with forwarding_signals(child):
            try:
                analysis = record_live(store, pid=child.pid, kind="run", command=tuple(command), options=options,
                                       run_id=run_id, alive=lambda: child.poll() is None, probe_stacks=False,
                                       started_ns=started_ns)
            finally:  # a store that takes no more ends the recording, not the command: it is waited for
                wait_for(child)
    return Report(analysis, samples=_samples(store, run_id))


def _samples(store: Store, run_id: str) -> pd.DataFrame | None:
    frame = store.samples(run_id)
    return frame if len(frame) else None
