"""Python stack samples of the target and its workers, taken with py-spy, and what they mean.

Each dump is ``py-spy dump --pid P --json --nonblocking``: py-spy reads the target's memory without
pausing it, so the target does not slow down (a stack may now and then be torn; one sample among many).
Samples are stored as (ts_ns, pid, tid, state, stack_id) with the frames interned per run.

The classifiers at the bottom are pure functions of frames; the live analyzer uses them to say where
the main thread's time went (waiting on the DataLoader, host-device syncs, NCCL waits, launching work,
plain Python) and whether loader workers compute or wait on reads.
"""

from __future__ import annotations

import json
import linecache
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpuscope.model.schema import NATIVE_FILE, NON_BLOCKING_COPY, STATE_ACTIVE, STATE_DISK, STATE_IDLE, StackRow

ProblemKind = Literal["missing", "permission", "not_python", "gone", "other"]

DUMP_TIMEOUT_S = 2.0
EVERY_S = 1.0
"""Default dump cadence. Each py-spy dump costs about 10-15 ms of CPU (mostly py-spy finding the
interpreter in the target's memory), so dumping once a second keeps gpuscope near 1-3% of one core."""
MAX_CHILDREN = 2
"""Child processes (DataLoader workers) dumped per tick besides the target, in turn: workers do the
same work, so a rotating few tell their share of CPU and reads as well as all of them would."""
MAX_ROOTS = 4
"""Trainers dumped per tick: all of them up to this many, else this many in turn (eight ranks on a node
would otherwise cost eight dumps a second)."""
NOT_PYTHON_AFTER = 3
"""Failures in a row before a pid counts as not Python: a process just launched may not have its
interpreter mapped yet on the first look."""

PTRACE_HINT = ("run gpuscope as the target's user or as root, grant CAP_SYS_PTRACE"
               " (docker: --cap-add SYS_PTRACE), or allow it with `sysctl kernel.yama.ptrace_scope=0`")


@dataclass(frozen=True)
class StackProblem:
    """Why stacks could not be taken, as one line a user can act on."""

    kind: ProblemKind
    message: str
    pid: int | None = None


@dataclass
class StackBatch:
    """Stack samples of one or more ticks, and the frames of stack ids first seen in them."""

    rows: list[StackRow] = field(default_factory=list)
    stacks: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def extend(self, other: StackBatch) -> None:
        self.rows += other.rows
        self.stacks |= other.stacks


def find_pyspy() -> str | None:
    """py-spy next to this interpreter (a virtualenv not on PATH), else on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    if beside.is_file():
        return str(beside)
    return shutil.which("py-spy")


class StackSampler:
    """Dumps the Python stacks of the processes ``pids()`` names, at most once per ``every_s``: the
    roots (``roots()``, the trainers; else ``root``, the target) each time, and up to ``max_children``
    of the others in turn. ``on_dump(pid, stacks)`` hears every dump (the role tracker reads them).

    ``command`` is the py-spy invocation (default: ``find_pyspy()``); tests may prefix it (run it as
    another user, say). A pid that is not Python is dropped after a few tries; a pid py-spy may not
    read (ptrace refused) is dropped at once, and the others are still sampled. Each problem is
    reported once, in ``problems``.
    """

    name = "stacks"

    def __init__(self, pids: Callable[[], Iterable[int]], *, root: int | None = None, every_s: float = EVERY_S,
                 max_children: int = MAX_CHILDREN, command: Sequence[str] | None = None,
                 proc_root: Path = Path("/proc"), roots: Callable[[], Iterable[int]] | None = None,
                 on_dump: Callable[[int, list[tuple[str, ...]]], None] | None = None) -> None:
        self._pids = pids
        self._roots = roots or (lambda: () if root is None else (root,))
        self._on_dump = on_dump
        self._max_children = max_children
        self._turn = self._root_turn = 0
        self._every_ns = int(every_s * 1e9)
        exe = find_pyspy()
        self._command = tuple(command) if command is not None else ((exe,) if exe else ())
        self._proc_root = proc_root
        self._ids: dict[tuple[str, ...], int] = {}
        self._failures: dict[int, int] = {}
        self._skip: set[int] = set()
        self._last_ns: int | None = None
        self.problems: list[StackProblem] = []
        self._reported: set[str] = set()
        self._refused: list[int] = []
        """Pids refused after the first, named together (a ptrace rule refuses a whole tree alike)."""
        self._refusal_named = False
        self.enabled = bool(self._command)
        if not self.enabled:
            self._report(StackProblem("missing", "py-spy not found: install it with `pip install 'gpuscope[stacks]'`"
                                      " for stack samples; collecting without them"))

    def check(self, pid: int) -> StackProblem | None:
        """Dump ``pid`` once to tell early whether stacks can be had. py-spy missing turns stack
        sampling off; a pid refused or not Python is not tried again. The caller reports the problem."""
        if not self.enabled:
            return StackProblem("missing", "py-spy is not available")
        result = self._dump_all([pid]).get(pid)
        if not isinstance(result, StackProblem):
            return None
        if result.kind == "missing":
            self.enabled = False
        elif result.kind in ("permission", "not_python", "gone"):
            self._skip.add(pid)
            self._reported.add(result.message)
            self._refusal_named = self._refusal_named or result.kind == "permission"
        return result

    def take_problems(self) -> list[StackProblem]:
        """Problems met since the last call, each reported once per run; the pids refused after the
        first refusal in one line."""
        problems, self.problems = self.problems, []
        if self._refused:
            pids, self._refused = self._refused, []
            problems.append(StackProblem("permission", f"py-spy was refused {len(pids)} more pid"
                                         f"{'s' if len(pids) > 1 else ''} for the same reason: "
                                         f"{', '.join(map(str, sorted(pids)))}"))
        return problems

    def sample(self, now_ns: int) -> StackBatch:
        batch = StackBatch()
        if not self.enabled or (self._last_ns is not None and now_ns - self._last_ns < self._every_ns):
            return batch
        self._last_ns = now_ns
        pids = self._choose(sorted(set(self._pids()) - self._skip), set(self._roots()))
        for pid, result in self._dump_all(pids).items():
            if isinstance(result, StackProblem):
                self._on_problem(result)
                continue
            self._failures.pop(pid, None)
            self._add_threads(batch, now_ns, pid, result)
        return batch

    def close(self) -> None:
        self._ids.clear()

    # -- internals -----------------------------------------------------------------------

    def _choose(self, pids: list[int], roots: set[int]) -> list[int]:
        """The roots (up to ``MAX_ROOTS`` in turn), and the next ``max_children`` of the other pids in turn."""
        chosen = [p for p in pids if p in roots]
        others = [p for p in pids if p not in roots]
        if len(chosen) > MAX_ROOTS:
            start = self._root_turn % len(chosen)
            self._root_turn += MAX_ROOTS
            chosen = (chosen[start:] + chosen[:start])[:MAX_ROOTS]
        if len(others) > self._max_children:
            start = self._turn % len(others)
            self._turn += self._max_children
            others = (others[start:] + others[:start])[:self._max_children]
        return chosen + others

    def _dump_all(self, pids: Sequence[int]) -> dict[int, list[dict[str, object]] | StackProblem]:
        """One py-spy per pid, run side by side so a tick costs one dump's wall time, not the sum."""
        running = {}
        for pid in pids:
            try:
                running[pid] = subprocess.Popen([*self._command, "dump", "--pid", str(pid), "--json", "--nonblocking"],
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            except OSError as exc:
                for started in running.values():
                    started.kill()
                    started.communicate()
                return {pid: StackProblem("missing", f"cannot run py-spy ({exc.strerror or exc}): install it with"
                                                     " `pip install 'gpuscope[stacks]'`; collecting without stacks",
                                          pid)}
        out: dict[int, list[dict[str, object]] | StackProblem] = {}
        for pid, proc in running.items():
            try:
                stdout, stderr = proc.communicate(timeout=DUMP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                out[pid] = StackProblem("other", f"py-spy took over {DUMP_TIMEOUT_S:g} s on pid {pid}", pid)
                continue
            out[pid] = _parse_dump(pid, proc.returncode, stdout, stderr)
        return out

    def _on_problem(self, problem: StackProblem) -> None:
        pid = problem.pid
        if problem.kind == "missing":
            self.enabled = False
            self._report(problem)
        elif problem.kind == "permission" and pid is not None:
            self._skip.add(pid)  # one refusal (another user's process, a ptrace rule) costs that pid only
            if self._refusal_named:
                self._refused.append(pid)
            else:
                self._refusal_named = True
                self._report(problem)
        elif problem.kind == "gone" and pid is not None:
            self._skip.add(pid)
        elif pid is not None:
            self._failures[pid] = self._failures.get(pid, 0) + 1
            if self._failures[pid] >= NOT_PYTHON_AFTER:
                self._skip.add(pid)
                self._report(problem)

    def _report(self, problem: StackProblem) -> None:
        if problem.message not in self._reported:
            self._reported.add(problem.message)
            self.problems.append(problem)

    def _add_threads(self, batch: StackBatch, now_ns: int, pid: int, threads: list[dict[str, object]]) -> None:
        seen: list[tuple[str, ...]] = []
        for thread in threads:
            tid = int(thread.get("os_thread_id") or thread.get("thread_id") or 0)  # type: ignore[call-overload]
            frames = stack_frames(thread.get("frames") or [])  # type: ignore[arg-type]
            if not frames:
                continue
            seen.append(frames)
            stack_id = self._ids.get(frames)
            if stack_id is None:
                stack_id = self._ids[frames] = len(self._ids) + 1
                batch.stacks[stack_id] = frames
            state = STATE_ACTIVE if thread.get("active") else STATE_IDLE
            if thread_state(pid, tid, self._proc_root) == "D":
                state = STATE_DISK
            batch.rows.append((now_ns, pid, tid, state, stack_id))
        if self._on_dump is not None:
            self._on_dump(pid, seen)


def _parse_dump(pid: int, returncode: int | None, stdout: bytes,
                stderr: bytes) -> list[dict[str, object]] | StackProblem:
    if returncode == 0:
        try:
            threads = json.loads(stdout)
        except ValueError:
            return StackProblem("other", f"py-spy printed something that is not JSON for pid {pid}", pid)
        return threads if isinstance(threads, list) else StackProblem("other", "unexpected py-spy output", pid)
    return classify_error(pid, stderr.decode(errors="replace"))


def classify_error(pid: int, text: str) -> StackProblem:
    """Turn py-spy's error text into one line that says what to do."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "py-spy failed")
    lowered = text.lower()
    if "permission denied" in lowered or "operation not permitted" in lowered:
        return StackProblem("permission", f"py-spy may not read pid {pid} (ptrace refused): {PTRACE_HINT};"
                                          " no stack samples from that pid", pid)
    if "failed to find python version" in lowered or "failed to find a python interpreter" in lowered:
        return StackProblem("not_python", f"pid {pid} is not a Python process: no stack samples from it", pid)
    if "check that the process is running" in lowered or "no such process" in lowered:
        return StackProblem("gone", f"pid {pid} ended", pid)
    return StackProblem("other", f"py-spy failed on pid {pid}: {first.removeprefix('Error: ')}", pid)


def thread_state(pid: int, tid: int, proc_root: Path = Path("/proc")) -> str | None:
    """The kernel's one-letter state of one thread (``D`` = waiting on disk), or None if unknown."""
    try:
        stat = (proc_root / str(pid) / "task" / str(tid) / "stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2:]
    return rest[0] if rest else None


# -- frames ----------------------------------------------------------------------------------

# A C call on the innermost Python line does not show as a frame without --native (slow, and it
# pauses the target); these calls block the host on the device, so the line's text names them.
_NATIVE_CALLS = (("Tensor.item", re.compile(r"\.item\(\s*\)")), ("Tensor.cpu", re.compile(r"\.cpu\(")),
                 ("Tensor.tolist", re.compile(r"\.tolist\(")), ("Tensor.numpy", re.compile(r"\.numpy\(")),
                 ("Tensor.to", re.compile(r"\.to\(")), ("Tensor.cuda", re.compile(r"\.cuda\(")),
                 ("Tensor.backward", re.compile(r"\.backward\(")))


def stack_frames(frames: Sequence[dict[str, object]]) -> tuple[str, ...]:
    """py-spy's frames (innermost first) as "function (file:line)", outermost first.

    When the innermost line calls a known blocking tensor method, a frame "Tensor.item (<native>:0)"
    is added below it, so the analysis can tell a host-device sync from plain Python.
    """
    out = [f"{f.get('name')} ({f.get('short_filename') or f.get('filename')}:{f.get('line')})"
           for f in reversed(frames)]
    if frames:
        inner = frames[0]
        call = _native_call(str(inner.get("filename") or ""), inner.get("line"))
        if call:
            out.append(f"{call} ({NATIVE_FILE}:0)")
    return tuple(out)


_NON_BLOCKING = re.compile(r"non_blocking\s*=\s*True")


def _native_call(filename: str, line: object) -> str | None:
    if not isinstance(line, int) or not filename or filename.startswith("<"):
        return None
    text = linecache.getline(filename, line)
    name = next((name for name, pattern in _NATIVE_CALLS if pattern.search(text)), None)
    if name in ("Tensor.to", "Tensor.cuda") and _NON_BLOCKING.search(text):
        return NON_BLOCKING_COPY
    return name
