"""NVML's process ids in the terms of gpuscope's own PID namespace.

The NVIDIA driver knows no PID namespaces: NVML always reports a process by its pid in the host's (initial)
namespace. gpuscope in a container sees its target by the container's pids, so the two must be matched through a
/proc that shows the host's pids: ``NSpid`` in ``/proc/PID/status`` lists a process's pid in each namespace from
that /proc's down to its own. On the host (or with the host's PID namespace shared) nothing needs matching. In a
container, the host's /proc has to be mounted in (read-only; ``GPUSCOPE_HOST_PROC`` names where, ``/host/proc`` is
looked at by default); without it NVML's pids cannot be matched and per-process GPU rows are left out, with one
line saying so, rather than matched to whichever local process happens to carry the same number.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HOST_PROC_ENV = "GPUSCOPE_HOST_PROC"
DEFAULT_HOST_PROC = Path("/host/proc")
PROC_PID_INIT_INO = 0xEFFFFFFC
"""The inode of the initial PID namespace (the kernel's PROC_PID_INIT_INO): /proc/self/ns/pid on the host."""

UNMATCHED = ("gpuscope runs in a PID namespace of its own (a container) and NVML reports the host's process ids: "
             "per-process GPU memory and SM shares are n/a. Mount the host's /proc read-only and set "
             f"{HOST_PROC_ENV} to it, or share the host's PID namespace (docker --pid=host, hostPID: true)")


@dataclass(frozen=True)
class PidNamespace:
    """How to read an NVML pid here: as is (``depth`` 0), or through ``host_proc`` (``depth`` levels above ours)."""

    proc: Path = Path("/proc")
    host_proc: Path | None = None
    depth: int = 0
    problem: str | None = None
    """One line when NVML's pids cannot be matched here (then ``local`` answers None for every pid)."""

    @classmethod
    def detect(cls, *, proc: Path = Path("/proc"), env: Mapping[str, str] | None = None,
               on_host: bool | None = None) -> PidNamespace:
        """Where gpuscope runs: the host's namespace, or a child one with or without the host's /proc at hand.
        ``on_host`` overrides what /proc/self/ns/pid says."""
        env = os.environ if env is None else env
        if on_host is None:
            on_host = _in_initial_namespace(proc)
        if on_host:
            return cls(proc=proc)
        named = env.get(HOST_PROC_ENV, "").strip()
        for candidate in ([Path(named)] if named else [DEFAULT_HOST_PROC]):
            chain = nspids(candidate / "self" / "status")
            if chain is not None and len(chain) > 1:
                return cls(proc=proc, host_proc=candidate, depth=len(chain) - 1)
        if named:
            return cls(proc=proc, problem=f"{HOST_PROC_ENV}={named} is not the host's /proc as seen from this "
                                          f"container (its NSpid does not reach above this PID namespace): "
                                          f"per-process GPU memory and SM shares are n/a")
        return cls(proc=proc, problem=UNMATCHED)

    def local(self, host_pid: int) -> int | None:
        """``host_pid`` (NVML's) as this namespace numbers it; None for a process not visible from here."""
        if self.problem is not None:
            return None
        if self.depth == 0 or self.host_proc is None:
            return host_pid
        chain = nspids(self.host_proc / str(host_pid) / "status")
        if chain is None or len(chain) <= self.depth:
            return None  # gone, or a process of the host (or of a namespace above ours)
        pid = chain[self.depth]
        # The same numbers from here down, and the same start time: the process we see, not a namesake of a
        # sibling container's that happens to hold the same pid at our level.
        if nspids(self.proc / str(pid) / "status") != chain[self.depth:]:
            return None
        start = start_ticks(self.proc / str(pid) / "stat")
        if start is None or start != start_ticks(self.host_proc / str(host_pid) / "stat"):
            return None
        return pid


def _in_initial_namespace(proc: Path) -> bool:
    try:
        return os.stat(proc / "self" / "ns" / "pid").st_ino == PROC_PID_INIT_INO
    except OSError:
        return True  # no namespace to tell (an old kernel, no /proc): take NVML's pids as they are


def nspids(status: Path) -> list[int] | None:
    """The ``NSpid`` line of a /proc status file: the pid in each namespace, outermost first; None when unreadable."""
    try:
        text = status.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("NSpid:"):
            try:
                return [int(x) for x in line.split()[1:]]
            except ValueError:
                return None
    return None


def start_ticks(stat: Path) -> int | None:
    """Field 22 of /proc/PID/stat: the process's start in clock ticks since boot, the same in every namespace."""
    try:
        text = stat.read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # the command name may hold spaces and parentheses
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None
