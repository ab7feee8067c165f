"""Which process of a job's tree trains, which loads its data, and which only launches or helps.

People start training through launchers and wrappers (``torchrun``, ``accelerate launch``,
``deepspeed``, ``srun``, ``mpirun``, ``bash -c``, ``timeout``, ``python -m torch.distributed.run``), so
the launched pid is rarely the training process, and not every child of a trainer is a DataLoader
worker (wandb's service, compile workers, a tokenizer pool, a subprocess of its own). The rules:

- a *launcher* is a known launcher or wrapper (by its command line), a process whose stacks run a
  launcher (torch's elastic agent, ``torch.multiprocessing.spawn``), a process holding no GPU whose
  descendants do, or a Python process without a rank whose children have one;
- a *trainer* is, below the launchers, a process that holds a GPU context or, without one, a Python process;
- a *loader worker* is a trainer's child whose stacks run torch's ``_worker_loop`` or, before any stack
  says otherwise, a Python child forked from it (same command line) or started by multiprocessing's spawn;
- every other process under a trainer is a *helper*.

When no process qualifies as a trainer, the launched process is one (a native program, say).
``assign_roles`` is a pure function of the facts; ``RoleTracker`` gathers them from the live tree,
NVML's per-process rows and the stack samples.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import psutil

from gpuscope.model import schema
from gpuscope.model.schema import PROC_RANK, PROC_ROLE, RANK_ENV, ROLE_CODES, ProcessRole, SampleRow

Role = ProcessRole

StackHint = Literal["launcher", "loader_worker", "other"]

LAUNCHER_PROGRAMS = frozenset({
    "torchrun", "accelerate", "deepspeed", "ds", "srun", "mpirun", "mpiexec", "orterun", "prterun", "orted",
    "prted", "hydra_pmi_proxy", "pmi_proxy", "bash", "sh", "dash", "zsh", "ksh", "fish", "timeout", "env",
    "nohup", "nice", "ionice", "taskset", "numactl", "stdbuf", "time", "setsid", "chrt", "flock", "xargs",
    "sudo", "su", "runuser", "uv", "poetry", "pipenv", "conda", "mamba", "micromamba", "pixi", "hatch",
    "make", "tini", "dumb-init", "apptainer", "singularity", "python-launcher",
})
LAUNCHER_MODULES = frozenset({
    "torch.distributed.run", "torch.distributed.launch", "accelerate.commands.launch",
    "accelerate.commands.accelerate_cli", "deepspeed.launcher.launch", "deepspeed.launcher.runner",
})
LAUNCHER_FILES = ("torch/distributed/elastic/agent/", "torch/distributed/launcher/", "torch/distributed/run.py",
                  "torch/multiprocessing/spawn.py", "accelerate/commands/launch.py", "deepspeed/launcher/")
"""Frames only a launcher runs (not ``torch/distributed/elastic/multiprocessing/errors``: trainers run
under its ``@record`` decorator)."""
NOT_WORKER_AFTER = 2
"""Stack dumps of a trainer's child without torch's ``_worker_loop`` before it counts as a helper
(a worker just forked may still be in multiprocessing's bootstrap on its first dump)."""


@dataclass(frozen=True)
class ProcFacts:
    """What the command line and environment of one process say."""

    pid: int
    ppid: int
    argv: tuple[str, ...]
    python: bool
    launcher: bool
    spawned: bool
    """Started by multiprocessing's spawn or forkserver (``--multiprocessing-fork``): a worker's way in."""
    rank: int | None = None


def facts_from_argv(pid: int, ppid: int, argv: Sequence[str], name: str = "",
                    environ: Mapping[str, str] | None = None) -> ProcFacts:
    """The facts of a process from its command line (``name`` when the command line is unreadable)."""
    words = tuple(argv) or ((name,) if name else ())
    prog = _base(words[0]) if words else ""
    python = prog.startswith(("python", "pypy"))
    launcher = prog in LAUNCHER_PROGRAMS
    if python:
        rest = [w for w in words[1:] if not (w.startswith("-") and w != "-m")]
        if rest[:1] == ["-m"] and len(rest) > 1:
            launcher = rest[1] in LAUNCHER_MODULES
        elif rest:
            launcher = _base(rest[0]) in LAUNCHER_PROGRAMS
    spawned = "--multiprocessing-fork" in words or any("multiprocessing.spawn" in w for w in words)
    return ProcFacts(pid=pid, ppid=ppid, argv=words, python=python, launcher=launcher, spawned=spawned,
                     rank=_rank(environ or {}))


def assign_roles(facts: Mapping[int, ProcFacts], root: int, *, gpu_pids: Iterable[int] = (),
                 hints: Mapping[int, StackHint] | None = None) -> dict[int, Role]:
    """The role of every process in ``facts`` (a tree under ``root``); see the module's rules."""
    hints = hints or {}
    gpu = set(gpu_pids)
    children: dict[int, list[int]] = {}
    for f in facts.values():
        if f.pid != root and f.ppid in facts:
            children.setdefault(f.ppid, []).append(f.pid)
    if root not in facts:
        return {}
    under_gpu = _holds_below(root, children, gpu)
    roles: dict[int, Role] = {}

    def own(pid: int) -> Role:
        f = facts[pid]
        kids = children.get(pid, [])
        if f.launcher or hints.get(pid) == "launcher" or (pid not in gpu and any(under_gpu.get(k) for k in kids)):
            return "launcher"
        if f.python and f.rank is None and any(facts[k].rank is not None for k in kids):
            return "launcher"
        if pid in gpu or f.python:
            return "trainer"
        return "launcher" if kids else "helper"

    def child_of_trainer(pid: int, parent: int) -> Role:
        hint = hints.get(pid)
        if hint is not None:
            return "loader_worker" if hint == "loader_worker" else "helper"
        f, p = facts[pid], facts[parent]
        return "loader_worker" if f.python and (f.argv == p.argv or f.spawned) else "helper"

    stack: list[tuple[int, int | None]] = [(root, None)]
    while stack:
        pid, parent = stack.pop()
        parent_role = roles.get(parent) if parent is not None else None
        if parent_role == "trainer" and parent is not None:
            roles[pid] = child_of_trainer(pid, parent)
        elif parent_role in ("loader_worker", "helper"):
            roles[pid] = "helper"
        else:
            roles[pid] = own(pid)
        stack.extend((kid, pid) for kid in children.get(pid, []))
    if root in roles and "trainer" not in roles.values() and not _known_launcher(facts[root], hints.get(root)):
        roles[root] = "trainer"  # a native program, say: the launched process is all there is to follow
    return roles


def _known_launcher(facts: ProcFacts, hint: StackHint | None) -> bool:
    """A launcher whatever its children do (its trainers may have exited, or not started yet)."""
    return facts.launcher or hint == "launcher"


def stack_hint(thread_frames: Iterable[Sequence[str]]) -> StackHint | None:
    """What one dump of a process says of its role: a launcher's loop, torch's worker loop, or
    neither ("other"); None when the dump shows only multiprocessing's start-up or nothing."""
    seen_any = False
    for frames in thread_frames:
        if any(frame.startswith("_worker_loop (") and "torch/utils/data/_utils/worker.py" in frame for frame in frames):
            return "loader_worker"
        if any(any(path in frame for path in LAUNCHER_FILES) for frame in frames):
            return "launcher"
        seen_any = seen_any or bool(frames)
    return "other" if seen_any else None


class RoleTracker:
    """Collects facts about the tree's processes as they come and says each one's role."""

    def __init__(self) -> None:
        self._facts: dict[int, ProcFacts] = {}
        self._gpu_pids: set[int] = set()
        self._hints: dict[int, StackHint] = {}
        self._others: dict[int, int] = {}
        self.roles: dict[int, Role] = {}

    def update(self, procs: Sequence[psutil.Process], root: int) -> dict[int, Role]:
        """Refresh the facts of ``procs`` (the live tree, root first) and return their roles."""
        live = {p.pid for p in procs}
        for gone in set(self._facts) - live:
            self._facts.pop(gone, None)
            self._hints.pop(gone, None)
            self._others.pop(gone, None)
        for proc in procs:
            facts = _read_facts(proc, self._facts.get(proc.pid))
            if facts is not None:
                self._facts[proc.pid] = facts
        self.roles = assign_roles(self._facts, root, gpu_pids=self._gpu_pids & live, hints=self._hints)
        return self.roles

    def note_gpu(self, pid: int) -> None:
        """NVML listed ``pid`` among a GPU's compute processes."""
        self._gpu_pids.add(pid)

    def note_stacks(self, pid: int, thread_frames: Iterable[Sequence[str]]) -> None:
        """One py-spy dump of ``pid``; a launcher or worker loop is decisive, other code counts after a few."""
        hint = stack_hint(thread_frames)
        if hint is None or self._hints.get(pid) in ("launcher", "loader_worker"):
            return
        if hint == "other":
            self._others[pid] = self._others.get(pid, 0) + 1
            if self._others[pid] < NOT_WORKER_AFTER:
                return
        self._hints[pid] = hint

    def pids(self, role: Role) -> list[int]:
        return sorted(pid for pid, r in self.roles.items() if r == role)

    def maybe_python(self, pid: int) -> bool:
        """Whether py-spy may find an interpreter in ``pid``: Python by its command line, or not yet known."""
        facts = self._facts.get(pid)
        return facts is None or facts.python

    def rank(self, pid: int) -> int | None:
        facts = self._facts.get(pid)
        return facts.rank if facts is not None else None


def role_rows(roles: Mapping[int, Role], tracker: RoleTracker, now_ns: int) -> list[SampleRow]:
    """Sample rows saying each process's role (and a trainer's rank where known) at ``now_ns``."""
    rows: list[SampleRow] = []
    for pid, role in roles.items():
        rows.append((now_ns, schema.HOST, schema.NO_GPU, pid, PROC_ROLE, float(ROLE_CODES[role])))
        rank = tracker.rank(pid)
        if rank is not None and role == "trainer":
            rows.append((now_ns, schema.HOST, schema.NO_GPU, pid, PROC_RANK, float(rank)))
    return rows


def _read_facts(proc: psutil.Process, known: ProcFacts | None) -> ProcFacts | None:
    """Facts of a live process; re-read only when its command line changed (an exec: ``bash -c`` often
    becomes the command it runs, under the same pid). A process that has exited and is not yet reaped reads an
    empty command line and environment: it keeps what it was (a trainer read again as a Python process without
    a rank, above its worker's last known rank, would pass for a launcher)."""
    try:
        argv = tuple(proc.cmdline())
        if known is not None and (known.argv == argv or not argv):
            return known
        name = proc.name()
        ppid = proc.ppid()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return known
    try:
        environ: Mapping[str, str] = proc.environ()
    except (psutil.Error, OSError):
        environ = {}
    return facts_from_argv(proc.pid, ppid, argv, name, environ)


def _holds_below(root: int, children: Mapping[int, list[int]], gpu: set[int]) -> dict[int, bool]:
    """For each pid: does it or a descendant hold a GPU context."""
    out: dict[int, bool] = {}
    order, stack = [], [root]
    while stack:
        pid = stack.pop()
        order.append(pid)
        stack.extend(children.get(pid, []))
    for pid in reversed(order):
        out[pid] = pid in gpu or any(out.get(k, False) for k in children.get(pid, []))
    return out


def _rank(environ: Mapping[str, str]) -> int | None:
    for key in RANK_ENV:
        value = environ.get(key, "").strip()
        if value.isdigit():
            return int(value)
    return None


def _base(word: str) -> str:
    return os.path.basename(word)
