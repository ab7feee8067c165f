"""Nothing outlives a kill: `kill -9` of `gpuscope analyze` reading eight ranks in worker processes, three times at
three moments, leaves no gpuscope process running, and the next analysis leaves the store's staging folder empty
and no run folder the catalog does not list. Real processes throughout; the workers are the pool's own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from gpuscope.store import Store
from tests.cli.helpers import gpuscope
from tests.conftest import SAMPLES, load_benchmark

GONE_WITHIN_S = 10.0
RANKS = 8


@pytest.fixture(scope="module")
def eight_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight ranks of the ResNet-50 sample (30 MB of JSON each, gzipped): enough for worker processes and for
    seconds of reading, so a kill lands while they work."""
    folder = tmp_path_factory.mktemp("ranks")
    load_benchmark("make_large_trace").make_large_trace(folder, sample_path=SAMPLES / "resnet50_dataloader_bound",
                                                        ranks=RANKS, copies=1, gzip_level=1)
    return folder


def staged_files(home: Path) -> int:
    root = home / "staging"
    return sum(len(os.listdir(p)) for p in root.iterdir() if p.is_dir()) if root.exists() else 0


def tree(pid: int) -> set[int]:
    try:
        return {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
    except psutil.NoSuchProcess:
        return set()


def living(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def end(pids: set[int]) -> None:
    """Kill whatever of ``pids`` still runs (so a failing test leaves nothing behind either)."""
    for pid in living(pids):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def gone_within(pids: set[int], seconds: float) -> set[int]:
    """Those of ``pids`` still running ``seconds`` from now (or fewer, once none is)."""
    deadline = time.monotonic() + seconds
    while living(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return living(pids)


def kill_when(ranks: Path, home: Path, ready: Callable[[set[int]], bool]) -> set[int]:
    """Start `gpuscope analyze` on the ranks, kill it with SIGKILL once ``ready(its process tree)``; every pid it
    had."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuscope", "analyze", str(ranks), "--jobs", "4"],
                            env={**os.environ, "GPUSCOPE_HOME": str(home)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    seen: set[int] = set()
    deadline = time.monotonic() + 120
    while not ready(seen):
        assert proc.poll() is None, "the analysis ended before the moment to kill it"
        assert time.monotonic() < deadline, "the moment to kill never came"
        seen |= tree(proc.pid)
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return seen


def test_kill_9_three_times_leaves_no_process_and_the_next_run_leaves_nothing(eight_ranks: Path,
                                                                              tmp_path: Path) -> None:
    home = tmp_path / "home"
    moments: list[Callable[[set[int]], bool]] = [
        lambda seen: len(seen) >= 3,  # the workers have started
        lambda seen: len(seen) >= 3 and staged_files(home) >= 1,  # a rank's columns are being staged
        lambda seen: staged_files(home) >= RANKS // 2,  # half the ranks are staged
    ]
    for moment in moments:
        pids = kill_when(eight_ranks, home, moment)
        try:
            assert len(pids) >= 3  # the command and its workers
            assert gone_within(pids, GONE_WITHIN_S) == set(), "processes of the killed analysis still run"
        finally:
            end(pids)
    done = gpuscope("analyze", str(eight_ranks), "--jobs", "4", home=home, timeout=300)
    assert done.returncode == 0, done.stderr
    assert os.listdir(home / "staging") == []
    with Store(home) as store:
        assert sorted(os.listdir(home / "runs")) == [m.id for m in store.list_runs()]


# A LocalCluster of worker processes, used by gpuscope.analyze, in a process that is then killed.
DASK_PARENT = textwrap.dedent("""
    import sys, threading
    import distributed
    import gpuscope
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       host="127.0.0.1")
    client = distributed.Client(cluster)
    gpuscope.analyze(sys.argv[1], dask=client)
    print("ready", flush=True)
    threading.Event().wait()
""")


def test_dask_local_workers_end_with_the_process_that_started_them(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    proc = subprocess.Popen([sys.executable, "-c", DASK_PARENT, str(SAMPLES / "dlrm_8rank")], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "GPUSCOPE_HOME": str(tmp_path)})
    pids: set[int] = set()
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        pids = tree(proc.pid)
        assert len(pids) >= 3  # the parent and the cluster's worker processes
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert gone_within(pids, GONE_WITHIN_S) == set()
    finally:
        proc.kill()
        proc.wait()
        end(pids)
