"""Host samples with psutil: the target's process tree (DataLoader workers included) and the machine.

Per process of the tree: its role (``collectors.roles``: launcher, trainer, loader worker, helper), CPU
in cores, thread count and states (running, disk wait ``D``), RSS, bytes read and written.
Machine-wide: CPU and iowait shares. Rates (CPU, bytes per second) need two looks at a
process, so a process seen for the first time has no rate rows yet: unknown, not zero.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from gpuscope.collectors.roles import RoleTracker, role_rows
from gpuscope.model import schema
from gpuscope.model.schema import SampleRow

_NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class _ProcLook:
    """What one look at a process saw; the next look turns counters into rates."""

    ts_ns: int
    cpu_s: float
    read_bytes: int | None
    write_bytes: int | None
    read_chars: int | None


class HostSampler:
    """Samples the process tree rooted at ``pid`` and the machine's CPU and iowait.

    Each process gets a role (``proc.role``); ``proc.is_worker`` = 1 marks the DataLoader workers
    among them. ``observe`` feeds the tracker what NVML saw (which pids hold a GPU context); the
    stack sampler feeds it what py-spy saw (``roles.note_stacks``). A process that cannot be read
    (gone, or another user's and not permitted) is skipped for that tick; a counter it does not allow
    is left out.
    """

    name = "host"

    def __init__(self, pid: int, *, proc_root: Path = Path("/proc")) -> None:
        self.pid = pid
        self._proc_root = proc_root
        self._procs: dict[int, psutil.Process] = {}
        self._last: dict[int, _ProcLook] = {}
        self._machine_last: Any = None
        self._cpu_count = _usable_cores()
        self.target_alive = True
        self.roles = RoleTracker()

    def pids(self) -> set[int]:
        """The target and its descendants as last seen; the NVML and stack samplers follow the same tree."""
        return set(self._procs) or {self.pid}

    def stack_pids(self) -> set[int]:
        """The pids worth a py-spy dump: the trainers, and every other process that runs Python (a shell,
        ``timeout`` or ``srun`` has no interpreter to read, and trying would only earn warnings)."""
        trainers = set(self.trainers())
        return {pid for pid in self.pids() if pid in trainers or self.roles.maybe_python(pid)}

    def trainers(self) -> list[int]:
        """The tree's training processes as last seen (the target until the tree has been read)."""
        return self.roles.pids("trainer") or [self.pid]

    def observe(self, rows: list[SampleRow]) -> None:
        """Note which of the tree's pids NVML lists on a GPU (a trainer's sure sign)."""
        for _ts, _source, gpu, pid, metric, _value in rows:
            if gpu >= 0 and pid != schema.NO_PID and metric == schema.PROC_GPU_MEMORY_BYTES:
                self.roles.note_gpu(pid)

    def tree(self) -> list[psutil.Process]:
        """Refresh and return the live process tree: the target first, then its descendants."""
        try:
            root = self._procs.get(self.pid) or psutil.Process(self.pid)
            self.target_alive = root.is_running() and root.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            self.target_alive = False
        if not self.target_alive:
            self._procs.clear()
            self._last.clear()
            return []
        try:
            children = root.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            children = []
        # Keep the cached Process objects: psutil checks a pid was not reused against them.
        procs = [self._procs.get(p.pid, p) for p in (root, *children)]
        self._procs = {p.pid: p for p in procs}
        for gone in set(self._last) - set(self._procs):
            del self._last[gone]
        self.roles.update(procs, self.pid)
        return procs

    def sample(self, now_ns: int) -> list[SampleRow]:
        rows: list[SampleRow] = []
        procs = self.tree()
        roles = self.roles.roles
        for proc in procs:
            rows += self._sample_process(proc, now_ns, is_worker=roles.get(proc.pid) == "loader_worker")
        rows += role_rows({p.pid: roles[p.pid] for p in procs if p.pid in roles}, self.roles, now_ns)
        rows += self._sample_machine(now_ns)
        return rows

    def close(self) -> None:
        self._procs.clear()
        self._last.clear()

    # -- one process ---------------------------------------------------------------------

    def _sample_process(self, proc: psutil.Process, now_ns: int, *, is_worker: bool) -> list[SampleRow]:
        pid = proc.pid

        def row(metric: str, value: float) -> SampleRow:
            return (now_ns, schema.HOST, schema.NO_GPU, pid, metric, float(value))

        try:
            with proc.oneshot():
                times = proc.cpu_times()
                rss = proc.memory_info().rss
                io = _io_counters(proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            return []
        look = _ProcLook(ts_ns=now_ns, cpu_s=times.user + times.system,
                         read_bytes=io.read_bytes if io else None, write_bytes=io.write_bytes if io else None,
                         read_chars=getattr(io, "read_chars", None) if io else None)
        rows = [row(schema.PROC_IS_WORKER, 1.0 if is_worker else 0.0), row(schema.PROC_RSS_BYTES, rss)]
        states = thread_states(pid, self._proc_root)
        if states:
            rows += [row(schema.PROC_THREADS, len(states)),
                     row(schema.PROC_THREADS_RUNNING, sum(s == "R" for s in states)),
                     row(schema.PROC_THREADS_DISK_WAIT, sum(s == "D" for s in states))]
        prev = self._last.get(pid)
        self._last[pid] = look
        if prev is not None and now_ns > prev.ts_ns:
            rows += [row(metric, value) for metric, value in _rates(prev, look)]
        return rows

    # -- the machine ---------------------------------------------------------------------

    def _sample_machine(self, now_ns: int) -> list[SampleRow]:
        times = psutil.cpu_times()
        prev, self._machine_last = self._machine_last, times
        rows: list[SampleRow] = []
        if self._cpu_count:
            rows.append((now_ns, schema.HOST, schema.NO_GPU, schema.NO_PID, schema.HOST_CPU_COUNT,
                         float(self._cpu_count)))
        if prev is None:
            return rows
        total = _total(times) - _total(prev)
        if total <= 0:
            return rows
        idle = (times.idle - prev.idle) + (_iowait(times) - _iowait(prev))
        rows.append((now_ns, schema.HOST, schema.NO_GPU, schema.NO_PID, schema.HOST_CPU,
                     _clamp01(1.0 - idle / total)))
        if hasattr(times, "iowait"):
            rows.append((now_ns, schema.HOST, schema.NO_GPU, schema.NO_PID, schema.HOST_IOWAIT,
                         _clamp01((_iowait(times) - _iowait(prev)) / total)))
        return rows


def thread_states(pid: int, proc_root: Path = Path("/proc")) -> list[str]:
    """One-letter kernel states (R running, S sleeping, D disk wait, ...) of a process's threads.

    psutil reports a state per process but not per thread, and a loader blocked on storage shows
    as threads in ``D``, so this reads ``/proc/PID/task/TID/stat`` (Linux only; elsewhere: []).
    """
    states: list[str] = []
    try:
        tids = os.listdir(proc_root / str(pid) / "task")
    except OSError:
        return states
    for tid in tids:
        try:
            stat = (proc_root / str(pid) / "task" / tid / "stat").read_text()
        except OSError:
            continue  # the thread ended between the listing and the read
        # The command name in parentheses may hold spaces or ')': the state follows the last ')'.
        rest = stat[stat.rfind(")") + 2:]
        if rest:
            states.append(rest[0])
    return states


def _usable_cores() -> int | None:
    """Cores this process may run on (a container or taskset may allow fewer than the machine has)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or None
    return psutil.cpu_count() or None


def _io_counters(proc: psutil.Process) -> Any | None:
    try:
        return proc.io_counters()
    except (psutil.AccessDenied, AttributeError, NotImplementedError):
        return None  # another user's process, or a platform without per-process I/O counters


def _rates(prev: _ProcLook, cur: _ProcLook) -> list[tuple[str, float]]:
    dt_s = (cur.ts_ns - prev.ts_ns) / _NS_PER_S
    out = [(schema.PROC_CPU_CORES, max(0.0, cur.cpu_s - prev.cpu_s) / dt_s)]
    for metric, a, b in ((schema.PROC_READ_BYTES_PER_S, prev.read_bytes, cur.read_bytes),
                         (schema.PROC_WRITE_BYTES_PER_S, prev.write_bytes, cur.write_bytes),
                         (schema.PROC_READ_CHARS_PER_S, prev.read_chars, cur.read_chars)):
        if a is not None and b is not None:
            out.append((metric, max(0, b - a) / dt_s))
    return out


def _total(times: Any) -> float:
    """All CPU time, counting guest time once: Linux's /proc/stat already counts it in user (and guest_nice in
    nice), so summing every field would count it twice; psutil's own cpu_percent subtracts it the same way."""
    return float(sum(times)) - float(getattr(times, "guest", 0.0)) - float(getattr(times, "guest_nice", 0.0))


def _iowait(times: object) -> float:
    return float(getattr(times, "iowait", 0.0))


def _clamp01(x: float) -> float:
    return min(1.0, max(0.0, x))
