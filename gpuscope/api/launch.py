"""Launching a command to record: a store for the run, py-spy's permission to read the command's whole tree
under Yama, the signals gpuscope receives passed on to the command, and the command's exit code. Shared by
``gpuscope run`` and ``gpuscope.record``.

Nothing runs in the child between fork and exec (no ``preexec_fn``, which is unsafe in a process with threads,
as a notebook's is): the Yama permission is given by the command's own Python processes, through the
``sitecustomize`` hook below, the first one included.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from gpuscope.store import Store

PR_SET_PTRACER = 0x59616D61
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)
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
def readable_forks(environ: Mapping[str, str], *, stacks: bool,
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


@contextmanager
def forwarding_signals(child: subprocess.Popen[bytes]) -> Iterator[None]:
    """While the command runs, SIGTERM and SIGINT sent to gpuscope are passed on to it, once.

    gpuscope itself stops sampling, reports, and exits with the command's code once it ends (the sampling loop
    chains to these handlers). A Ctrl-C at a terminal reaches the command by itself when it is in the terminal's
    foreground process group, as a command gpuscope started is: SIGINT is then not passed on, or the command would
    see it twice. Only from the main thread (Python delivers signals there); elsewhere a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def relay(signum: int, _frame: object) -> None:
        if child.poll() is not None or (signum == signal.SIGINT and _in_terminal_foreground(child.pid)):
            return
        try:
            child.send_signal(signum)
        except ProcessLookupError:  # ended between the poll and the kill
            pass

    previous = {sig: signal.signal(sig, relay) for sig in FORWARDED_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _in_terminal_foreground(pid: int) -> bool:
    """Whether ``pid`` is in the foreground process group of gpuscope's terminal (so a Ctrl-C reached it too)."""
    for fd in (0, 1, 2):
        try:
            return os.tcgetpgrp(fd) == os.getpgid(pid)
        except OSError:  # not a terminal, or the process is gone
            continue
    return False


def wait_for(child: subprocess.Popen[bytes], *, note: Callable[[str], None] | None = None) -> int:
    """The command's exit code, as a shell reports it (128 + N when killed by signal N)."""
    if child.poll() is None and note is not None:
        note(f"sampling ended; waiting for pid {child.pid} to exit")
    try:
        code = child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        code = child.wait()
    return 128 - code if code < 0 else code


@contextmanager
def run_store(*, save: bool) -> Iterator[Store]:
    """The store a run records into: the user's, or with ``save=False`` a scratch one removed afterwards."""
    if save:
        with Store() as store:
            yield store
        return
    scratch = Path(tempfile.mkdtemp(prefix="gpuscope-unsaved-"))
    try:
        with Store(scratch) as store:
            yield store
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
