"""The local worker processes that read ranks (or stretches of one large file), and how they end with the process
that started them.

A pool's workers wait on a queue for their next rank; when the analysis is killed (``kill -9``, the OOM killer, a
scheduler's SIGKILL) nothing would tell them, and they would live on as orphans holding their memory. Each
worker therefore asks, as it starts, to be killed when its parent ends: on Linux the kernel does it
(``PR_SET_PDEATHSIG``); everywhere a watchdog thread also looks at the parent's pid every half second and ends the
worker once the parent is gone (a reparented process has another parent).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.context import BaseContext
from typing import Any

PR_SET_PDEATHSIG = 1
"""prctl option (linux/prctl.h): the signal this process gets when the thread that created it exits."""
WATCH_EVERY_S = 0.5
ORPHAN_EXIT = 70
"""A worker's exit status when it ends because its parent did (EX_SOFTWARE)."""


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes, each of which ends when this process ends, however it ends.

    PR_SET_PDEATHSIG fires when the *thread* that started a worker exits; the pool starts its workers from the
    thread that submits the work, which holds the pool until it is shut down.
    """
    return ProcessPoolExecutor(max_workers=workers, mp_context=_context(), initializer=end_with_parent,
                               initargs=(os.getpid(),))


def forked_pool(workers: int, start: Callable[..., None], *args: Any) -> ProcessPoolExecutor:
    """A pool of ``workers`` forked processes that end with this process, as ``worker_pool``'s do, and each first
    run ``start(*args)``: the arguments reach them as the very objects this process holds, never pickled (only
    where ``can_fork``)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_start, initargs=(os.getpid(), start, args))


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def may_start_workers() -> bool:
    """Whether this process may start worker processes: a daemonic one (a ``multiprocessing.Pool``'s worker, say,
    where gpuscope is called from) may not, and reads in itself instead."""
    return not multiprocessing.current_process().daemon


def _start(parent_pid: int, start: Callable[..., None], args: tuple[Any, ...]) -> None:
    end_with_parent(parent_pid)
    start(*args)


def end_with_parent(parent_pid: int) -> None:
    """In a worker, first thing: be killed when ``parent_pid`` ends (or end now if it already has)."""
    _ask_kernel()
    if os.getppid() != parent_pid:  # the parent died before the kernel was asked
        os._exit(ORPHAN_EXIT)
    threading.Thread(target=_watch, args=(parent_pid,), name="gpuscope-parent-watch", daemon=True).start()


def _ask_kernel() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl in this libc: the watchdog alone
        pass


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(WATCH_EVERY_S)
    os._exit(ORPHAN_EXIT)


def _context() -> BaseContext | None:
    """fork where it exists: a forked worker starts with the reader and analyses already imported (a spawned
    or forkserver one imports them again, ~0.2 s each), and shares their memory with its parent."""
    return multiprocessing.get_context("fork") if can_fork() else None
