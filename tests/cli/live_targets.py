"""Start the real target processes the live tests attach to, and wait until they are doing their work."""

from __future__ import annotations

import functools
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from gpuscope.collectors.stacks import StackSampler, find_pyspy

TARGETS = Path(__file__).resolve().parent.parent / "targets"
TRAIN = TARGETS / "train_loader.py"
SPIN = TARGETS / "spin.py"


@functools.cache
def pyspy_cannot() -> str | None:
    """Why py-spy cannot dump a Python process here (not installed, ptrace refused), or None."""
    if find_pyspy() is None:
        return "py-spy is not installed (extra [stacks])"
    with started(str(SPIN), "60") as proc:  # spinning by now: its interpreter is there to be found
        for _ in range(3):  # a dump can fail now and then on a loaded machine (py-spy's own timeout)
            problem = StackSampler(lambda: {proc.pid}).check(proc.pid)
            if problem is None:
                return None
            if problem.kind == "permission":
                return problem.message
    return "py-spy could not read a Python process here"


@contextmanager
def started(*args: str, workers: int = 0, wait: bool = True) -> Iterator[subprocess.Popen[bytes]]:
    """A Python target from tests/targets, killed with its children at the end; with ``wait``, returned once it
    works: spin.py once it says it spins, and with ``workers`` once that many child processes run (torch
    imported, DataLoader workers up)."""
    spins = wait and Path(args[0]).name == SPIN.name
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE if spins else subprocess.DEVNULL)
    try:
        if spins:
            wait_ready(proc)
        if workers and wait:
            wait_for_workers(proc, workers)
        yield proc
    finally:
        for child in _children(proc.pid):
            child.kill()
        proc.kill()
        proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def wait_ready(proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    """Until the target says "ready" on its stderr (a pipe): it is doing its work, so sampling it now finds it
    there, however long its interpreter took to start on a loaded machine."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None:
                raise RuntimeError(f"target {proc.args!r} never said it was ready")
            if selector.select(timeout=left) and proc.stderr.readline().strip() == b"ready":
                return


def wait_for_workers(proc: subprocess.Popen[bytes], workers: int, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(_children(proc.pid)) < workers:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"target {proc.args!r} did not start its {workers} workers")
        time.sleep(0.1)


def tree(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The target and its children, to pause (``suspend``) and resume them."""
    return [psutil.Process(proc.pid), *_children(proc.pid)]


def _children(pid: int) -> list[psutil.Process]:
    try:
        children: list[psutil.Process] = psutil.Process(pid).children(recursive=True)
        return children
    except psutil.NoSuchProcess:
        return []
