"""Host samples of a real process tree: a parent with a CPU-burning child and a reading child (helpers)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gpuscope.collectors.host import HostSampler, thread_states
from gpuscope.model import schema as m
from gpuscope.model.schema import PROC_ROLE, ROLE_CODES, SampleRow

# The parent starts a CPU burner and a sleeper that keeps reading a file, then waits on both. Each child says
# "ready" once in its loop, and the parent prints their pids after both have: sampled from then on, they work.
TREE = """
import subprocess, sys, time
burn = "import sys\\nprint('ready', flush=True)\\nwhile True: sum(i * i for i in range(1000))"
read = ("import sys, time\\nopen(sys.argv[1], 'rb').read()\\nprint('ready', flush=True)\\n"
        "while True:\\n    open(sys.argv[1], 'rb').read()\\n    time.sleep(0.01)")
kids = [subprocess.Popen([sys.executable, '-c', burn], stdout=subprocess.PIPE, text=True),
        subprocess.Popen([sys.executable, '-c', read, sys.argv[1]], stdout=subprocess.PIPE, text=True)]
assert all(k.stdout.readline().strip() == 'ready' for k in kids)
print(' '.join(str(k.pid) for k in kids), flush=True)
time.sleep(60)
"""


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[int, int, int]]:
    blob = tmp_path / "blob"
    blob.write_bytes(b"x" * 256 * 1024)
    parent = subprocess.Popen([sys.executable, "-c", TREE, str(blob)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    burner, reader = (int(p) for p in parent.stdout.readline().split())
    try:
        yield parent.pid, burner, reader
    finally:
        for pid in (burner, reader):
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                pass
        parent.kill()
        parent.wait()


def by_pid(rows: list[SampleRow], metric: str) -> dict[int, float]:
    return {pid: value for _, _, _, pid, name, value in rows if name == metric}


def worked(burner: int, reader: int, timeout_s: float = 60.0) -> None:
    """Until the burner has had 0.3 s of CPU and the reader has read the file again (told by the kernel's
    counters), at least a second from now: what is sampled then has happened, however loaded the machine."""
    cpu, read = psutil.Process(burner).cpu_times(), psutil.Process(reader).io_counters().read_chars
    start = time.monotonic()
    while (time.monotonic() - start < 1.0 or sum(psutil.Process(burner).cpu_times()[:2]) - sum(cpu[:2]) < 0.3
           or psutil.Process(reader).io_counters().read_chars <= read):
        assert time.monotonic() - start < timeout_s, "the burner or the reader did no work"
        time.sleep(0.05)


def test_process_tree_cpu_io_and_workers(tree: tuple[int, int, int]) -> None:
    parent, burner, reader = tree
    sampler = HostSampler(parent)
    first = sampler.sample(time.time_ns())
    # Children started with other command lines are the trainer's helpers, not DataLoader workers.
    assert by_pid(first, m.PROC_IS_WORKER) == {parent: 0.0, burner: 0.0, reader: 0.0}
    assert by_pid(first, PROC_ROLE) == {parent: ROLE_CODES["trainer"], burner: ROLE_CODES["helper"],
                                        reader: ROLE_CODES["helper"]}
    assert sampler.trainers() == [parent]
    assert by_pid(first, m.PROC_CPU_CORES) == {}  # a rate needs two looks: unknown, not 0
    assert sampler.pids() == {parent, burner, reader}
    worked(burner, reader)
    second = sampler.sample(time.time_ns())
    cpu = by_pid(second, m.PROC_CPU_CORES)
    assert set(cpu) == {parent, burner, reader}
    # CPU shares, not times: the burner runs whenever it gets a core (how often depends on what else runs), the
    # parent only sleeps.
    assert cpu[burner] > 0 and cpu[burner] > 5 * cpu[parent]
    assert by_pid(second, m.PROC_READ_CHARS_PER_S)[reader] > 0
    assert all(v > 0 for v in by_pid(second, m.PROC_RSS_BYTES).values())
    assert by_pid(second, m.PROC_THREADS)[parent] >= 1
    machine = {name: v for _, _, _, pid, name, v in second if pid == m.NO_PID}
    assert 0.0 <= machine[m.HOST_CPU] <= 1.0 and 0.0 <= machine[m.HOST_IOWAIT] <= 1.0
    assert machine[m.HOST_CPU_COUNT] >= 1
    assert all(src == m.HOST and gpu == m.NO_GPU for _, src, gpu, *_ in second)


def test_target_exit_is_noticed(tree: tuple[int, int, int]) -> None:
    parent, burner, reader = tree
    sampler = HostSampler(parent)
    sampler.sample(time.time_ns())
    assert sampler.target_alive
    psutil.Process(parent).kill()
    psutil.Process(parent).wait(5)
    rows = sampler.sample(time.time_ns())
    assert not sampler.target_alive
    assert all(pid == m.NO_PID for *_, pid, _, _ in rows)  # only machine rows are left


def test_a_pid_that_never_existed_is_not_alive() -> None:
    sampler = HostSampler(2**22 + 12345)
    assert [r for r in sampler.sample(time.time_ns()) if r[3] != m.NO_PID] == []
    assert not sampler.target_alive


def test_thread_states_read_the_kernel_letter_after_the_name(tmp_path: Path) -> None:
    task = tmp_path / "42" / "task"
    for tid, comm, state in ((42, "python", "S"), (43, "pt_data) worker", "D"), (44, "x", "R")):
        (task / str(tid)).mkdir(parents=True)
        (task / str(tid) / "stat").write_text(f"{tid} ({comm}) {state} 1 2 3\n")
    assert sorted(thread_states(42, tmp_path)) == ["D", "R", "S"]
    assert thread_states(7, tmp_path) == []


def test_disk_wait_threads_are_counted(tmp_path: Path) -> None:
    # This process, seen through a /proc whose task states say two threads wait on disk.
    pid = os.getpid()
    task = tmp_path / str(pid) / "task"
    for tid, state in ((pid, "D"), (pid + 1, "D"), (pid + 2, "R")):
        (task / str(tid)).mkdir(parents=True)
        (task / str(tid) / "stat").write_text(f"{tid} (python) {state} 1\n")
    rows = HostSampler(pid, proc_root=tmp_path).sample(time.time_ns())
    assert by_pid(rows, m.PROC_THREADS_DISK_WAIT) == {pid: 2.0}
    assert by_pid(rows, m.PROC_THREADS_RUNNING) == {pid: 1.0}
    assert by_pid(rows, m.PROC_THREADS) == {pid: 3.0}


def test_only_python_processes_and_trainers_are_worth_a_stack_dump() -> None:
    shell = subprocess.Popen(["bash", "-c", f"{sys.executable} -c 'import time; time.sleep(30)'; true"])
    try:
        sampler = HostSampler(shell.pid)
        for _ in range(100):
            sampler.sample(time.time_ns())
            kids = psutil.Process(shell.pid).children()
            # Until bash's child has exec'd Python it is another bash: wait for the exec, then sample once more.
            if len(sampler.pids()) == 2 and kids and "python" in " ".join(kids[0].cmdline()):
                sampler.sample(time.time_ns())
                break
            time.sleep(0.05)
        (python,) = sampler.pids() - {shell.pid}
        assert sampler.trainers() == [python] and sampler.stack_pids() == {python}
    finally:
        for child in psutil.Process(shell.pid).children(recursive=True):
            child.kill()
        shell.kill()
        shell.wait()


def test_machine_cpu_busy_counts_guest_time_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux's user time already holds guest time (a VM the host runs): 1 s of user of which 0.5 s guest, and 1 s
    idle, is half busy, as psutil.cpu_percent says, not 1.5 of 2.5 s."""
    from collections import namedtuple

    Times = namedtuple("Times", "user nice system idle iowait irq softirq steal guest guest_nice")
    looks = iter([Times(10, 0, 0, 10, 0, 0, 0, 0, 5, 0), Times(11, 0, 0, 11, 0, 0, 0, 0, 5.5, 0)])
    monkeypatch.setattr(psutil, "cpu_times", lambda: next(looks))
    sampler = HostSampler(os.getpid())
    sampler._sample_machine(1)
    (busy,) = [v for *_, metric, v in sampler._sample_machine(2) if metric == m.HOST_CPU]
    assert busy == pytest.approx(0.5)
