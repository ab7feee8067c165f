"""`gpuscope run [options] -- CMD ...`: launch a command, sample it live, report, exit with its exit code.

The command gets ``GPUSCOPE_RUN_ID`` and ``GPUSCOPE_HOME`` in its environment, so
``gpuscope.torch.profile()`` inside it writes its Kineto trace into this run's folder and the
report joins the trace with the live samples.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import typer

from gpuscope.cli.attach import (
    DEFAULT_STACK_INTERVAL_S,
    DcgmOption,
    IntervalOption,
    LiveOptions,
    NoStacksOption,
    StackIntervalOption,
    UsdPerGpuHourOption,
    print_report,
    record_live,
)
from gpuscope.cli.common import JobHoursOption, JobStepsOption, SaveOption, fail, run_store, stderr
from gpuscope.collectors.sampler import DEFAULT_INTERVAL_S
from gpuscope.store import new_run_id
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
    name: str | None = typer.Option(None, "--name", help="Name of the saved run (default: the script)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout (after the"
                                  " command's own output)."),
    usd_per_gpu_hour: UsdPerGpuHourOption = None,
    job_hours: JobHoursOption = None,
    job_steps: JobStepsOption = None,
    save: SaveOption = True,
) -> None:
    """Launch a command (a training script), sample it live, print its report, exit with its exit code."""
    if not command:
        fail("give the command to run after `--`, e.g. gpuscope run -- python train.py")
    options = LiveOptions(duration_s=duration, interval_s=interval, stack_interval_s=stack_interval,
                          stacks=not no_stacks, dcgm_url=dcgm, name=name, json_out=json_out,
                          usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps, save=save)
    with run_store(save=save) as store, _readable_forks(os.environ, stacks=not no_stacks) as base_env:
        run_id = new_run_id()
        env = {**base_env, RUN_ID_ENV: run_id, HOME_ENV: str(store.home.resolve())}
        started_ns = time.time_ns()
        try:
            child = subprocess.Popen(command, env=env, preexec_fn=_allow_ptrace_by(os.getpid()))
        except OSError as exc:
            fail(f"cannot run {command[0]!r}: {exc.strerror or exc}")
        # A process just exec'd may not have its interpreter mapped yet: no py-spy probe here,
        # the stack sampler retries a few ticks before calling a pid not Python.
        report = record_live(store, pid=child.pid, kind="run", command=tuple(command), options=options,
                             run_id=run_id, alive=lambda: child.poll() is None, probe_stacks=False,
                             started_ns=started_ns)
    print_report(report, options)
    raise typer.Exit(_wait(child))


PR_SET_PTRACER = 0x59616D61


def _allow_ptrace_by(tracer_pid: int) -> Callable[[], None] | None:
    """Under Yama's ``ptrace_scope=1`` (Ubuntu's default) only a process's ancestors may read it, and
    py-spy, a child of gpuscope, is the command's sibling: the command first names gpuscope (and so its
    children) as its tracer, as a debugger-friendly program would. Without Yama this is a no-op."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None

    def allow() -> None:
        libc.prctl(PR_SET_PTRACER, tracer_pid, 0, 0, 0)  # EINVAL without Yama: nothing to allow

    return allow


YAMA_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")
PTRACER_ENV = "GPUSCOPE_PTRACER"
HOOK_MODULE = "_gpuscope_ptracer"
# Run by every Python process of the command at start-up (PYTHONPATH names its folder first), and
# again in every child it forks, since Yama's tracer exception is per process and a fork does not
# inherit it. Then it imports the sitecustomize it shadows, if any, so the user's own still runs.
PTRACER_HOOK = f"""\
import ctypes, os, sys
calls = []


def allow():
    try:
        ctypes.CDLL(None).prctl({PR_SET_PTRACER:#x}, int(os.environ["{PTRACER_ENV}"]), 0, 0, 0)
        calls.append(os.getpid())
    except (KeyError, ValueError, OSError, AttributeError):
        pass


allow()
os.register_at_fork(after_in_child=allow)
sys.modules["{HOOK_MODULE}"] = sys.modules[__name__]
_here = os.path.dirname(os.path.abspath(__file__))
_path = sys.path[:]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules["sitecustomize"]
try:
    import sitecustomize  # noqa: F401 - the user's own, now that this one is out of the way
except ImportError:
    pass
finally:
    sys.path[:] = _path
    sys.modules.setdefault("sitecustomize", sys.modules["{HOOK_MODULE}"])  # site's import expects one
"""


def yama_needs_hook(scope_path: Path = YAMA_SCOPE, euid: int | None = None) -> bool:
    """Under Yama ``ptrace_scope=1`` a non-root py-spy may read only the command gpuscope started,
    not the processes that command forks or spawns (DataLoader workers, torchrun's ranks)."""
    try:
        scope = scope_path.read_text().strip()
    except OSError:
        return False
    return scope == "1" and (os.geteuid() if euid is None else euid) != 0


@contextmanager
def _readable_forks(environ: Mapping[str, str], *, stacks: bool,
                    needed: Callable[[], bool] = yama_needs_hook) -> Iterator[dict[str, str]]:
    """The command's environment; under Yama scope 1, with the hook that names gpuscope the tracer of
    every Python process in the command's tree (a Python started with -E or -I skips it)."""
    env = dict(environ)
    if not stacks or not needed():
        yield env
        return
    folder = Path(tempfile.mkdtemp(prefix="gpuscope-ptracer-"))
    try:
        (folder / "sitecustomize.py").write_text(PTRACER_HOOK)
        env[PTRACER_ENV] = str(os.getpid())
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), env.get("PYTHONPATH")) if p)
        yield env
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _wait(child: subprocess.Popen[bytes]) -> int:
    """The command's exit code, as a shell reports it (128 + N when killed by signal N)."""
    if child.poll() is None:
        stderr.print(f"[dim]sampling ended; waiting for pid {child.pid} to exit[/dim]")
    try:
        code = child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        code = child.wait()
    return 128 - code if code < 0 else code
