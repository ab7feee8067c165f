"""The rank-reading pool's workers end with the process that started them, each of the two ways on its own: the
kernel's parent-death signal (Linux), and the watchdog that looks at the parent's pid (everywhere). Real processes:
a parent makes the pool, gets its workers' pids, and is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from gpuscope.traces import workers

PARENT = textwrap.dedent("""
    import os, sys, threading
    from gpuscope.traces import workers

    if sys.argv[1] == "watchdog":
        workers._ask_kernel = lambda: None
    else:
        workers._watch = lambda parent_pid: None
    pool = workers.worker_pool(2)
    pids = {pool.submit(os.getpid).result() for _ in range(20)}
    print(" ".join(map(str, sorted(pids))), flush=True)
    threading.Event().wait()
""")


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("way", [
    pytest.param("kernel", marks=pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's prctl")),
    "watchdog"])
def test_workers_end_when_their_parent_is_killed(way: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, way], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert pids and all(alive(p) for p in pids)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(p) for p in pids), way
    finally:
        parent.kill()
        parent.wait()
        for pid in (p for p in pids if alive(p)):
            os.kill(pid, signal.SIGKILL)


def test_a_worker_whose_parent_is_already_gone_ends_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def exit_now(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(workers.os, "_exit", exit_now)
    monkeypatch.setattr(workers, "_ask_kernel", lambda: None)
    with pytest.raises(SystemExit) as ended:
        workers.end_with_parent(os.getppid() + 1)  # not this process's parent: it died before the worker started
    assert ended.value.code == workers.ORPHAN_EXIT
