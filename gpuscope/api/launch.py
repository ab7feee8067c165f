"""Launching a command to record: a store for the run, py-spy's permission to read the command's whole tree
under Yama, and the command's exit code. Shared by ``gpuscope run`` and ``gpuscope.record``."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from gpuscope.store import Store

PR_SET_PTRACER = 0x59616D61


def allow_ptrace_by(tracer_pid: int) -> Callable[[], None] | None:
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
