"""Read untrusted input in a child process under the operating system's limits, so that a bomb ends the child and
the caller gets one line.

``run_limited(work, limits)`` forks; the child caps its address space (``RLIMIT_AS``: what it held plus
``limits.memory_bytes``) and its CPU time (``RLIMIT_CPU``), writes no core file, runs ``work`` with the cyclic
garbage collector off (the objects a pickle builds hold no cycles to find, and collecting them as they are built
costs more than building them), sends back what it returns and exits without freeing anything. Its result is
columns (``numpy`` arrays) and a body of plain fields: the arrays travel raw, the body as msgpack decoded into the
type the caller names (``decode``), so nothing the child sends is run or trusted to be of any other shape. A child
that runs out of memory, of CPU time, or dies, is one ``BudgetSpent`` here; the child is killed with its parent.
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import signal
import struct
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, TypeVar

import msgspec
import numpy as np

from gpuscope.traces.limits import ENV_PICKLE_MEMORY_GIB, PickleBudget, size_words
from gpuscope.traces.plain_data import BudgetSpent, NotPlainData
from gpuscope.traces.workers import end_with_parent

FORK = hasattr(os, "fork")
"""Where there is no fork (Windows), readers run in the calling process, on their own counted budgets."""
T = TypeVar("T")
_DTYPES = frozenset({"|u1", "|b1", "<i4", "<i8"})
"""The arrays a child may send."""
_HEAD = struct.Struct("<cQ")
_LENGTH = struct.Struct("<Q")


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    """Memory the child may take on top of what it shares with its parent."""
    cpu_s: float
    memory_words: str
    """How the memory limit reads in a message ("1.2 GiB, 12 times the pickle's size ...")."""


class _Refused(msgspec.Struct):
    message: str
    refused: bool
    budget: bool


def encode(value: Any) -> tuple[bytes, list[np.ndarray[Any, Any]]]:
    """``value`` (dataclasses, tuples, plain fields and numpy arrays) as a msgpack body and its arrays."""
    arrays: list[np.ndarray[Any, Any]] = []

    def hook(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            arrays.append(np.ascontiguousarray(obj))
            return len(arrays) - 1
        raise NotImplementedError(type(obj).__name__)  # msgspec's enc_hook way of saying: a type it cannot encode

    return msgspec.msgpack.encode(value, enc_hook=hook), arrays


def decode(body: bytes, arrays: list[np.ndarray[Any, Any]], kind: type[T]) -> T:
    """What ``encode`` made, as ``kind``; each array once, of the dtype its field names."""
    used: set[int] = set()

    def hook(wanted: Any, index: Any) -> Any:
        if type(index) is not int or not 0 <= index < len(arrays) or index in used:
            raise ValueError("not an array of the reader's")
        used.add(index)
        array = arrays[index]
        dtype = getattr(wanted, "__args__", (None, None))[1]
        if dtype is not None and np.dtype(dtype.__args__[0]) != array.dtype:
            raise ValueError(f"an array of {array.dtype} where {dtype} belongs")
        return array

    return msgspec.msgpack.decode(body, type=kind, dec_hook=hook)


def run_limited(work: Callable[[], tuple[bytes, list[np.ndarray[Any, Any]]]], limits: Limits
                ) -> tuple[bytes, list[np.ndarray[Any, Any]]]:
    """What ``work`` returns, run in a child under ``limits``; ``NotPlainData`` (and ``BudgetSpent``) raised in
    the child are raised here with their message, any other failure of the child is ``RuntimeError``."""
    read_fd, write_fd = os.pipe()
    address_space = _address_space_bytes()
    parent = os.getpid()
    with warnings.catch_warnings():  # Python 3.12 warns of forking with threads: the child runs only ``work``
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: measured by what it sends back
        os.close(read_fd)
        _child(work, write_fd, parent, None if address_space is None else address_space + limits.memory_bytes,
               limits.cpu_s)
    os.close(write_fd)
    ended: tuple[int, int, resource.struct_rusage] | None = None
    try:
        with os.fdopen(read_fd, "rb") as pipe:
            tag, body, arrays = _receive(pipe, limits.memory_bytes)
        ended = os.wait4(pid, 0)
    finally:
        if ended is None:  # interrupted, or a broken answer: the child goes too
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    _, status, usage = ended
    if tag == b"R" and os.waitstatus_to_exitcode(status) == 0:
        return body, arrays
    if tag == b"E":
        refused = msgspec.msgpack.decode(body, type=_Refused)
        if refused.budget:
            raise BudgetSpent(refused.message)
        raise NotPlainData(refused.message, refused=refused.refused)
    if tag == b"M":
        raise BudgetSpent(f"reading it needs more memory than the reader's limit of {limits.memory_words}")
    raise _died(status, usage.ru_utime + usage.ru_stime, tag, body, limits)


def _died(status: int, cpu_s: float, tag: bytes, body: bytes, limits: Limits) -> Exception:
    code = os.waitstatus_to_exitcode(status)
    if code in (-signal.SIGXCPU, -signal.SIGKILL) and cpu_s >= int(limits.cpu_s) - 0.5:
        return BudgetSpent(f"reading it took more than the reader's limit of {limits.cpu_s:.0f} CPU seconds")
    if code == -signal.SIGKILL:
        return BudgetSpent("the reading process was killed (by the system, short of memory?); free some memory "
                           "or lower GPUSCOPE_PICKLE_MEMORY_GIB")
    if code < 0:  # a crash in C code, most likely out of memory where nothing could say so
        return BudgetSpent(f"the reading process ended by signal {signal.Signals(-code).name} (past the "
                           f"reader's limit of {limits.memory_words}?)")
    if tag == b"X":
        return RuntimeError(f"reading in a child process failed: {body.decode('utf-8', 'replace')[:400]}")
    return RuntimeError(f"the reading process ended with status {code} and no answer")


def _receive(pipe: IO[bytes], most_bytes: int) -> tuple[bytes, bytes, list[np.ndarray[Any, Any]]]:
    """The child's answer: its tag, body and arrays (nothing past ``most_bytes`` is taken on its word)."""
    head = pipe.read(_HEAD.size)
    if len(head) < _HEAD.size:
        return b"", b"", []
    tag, length = _HEAD.unpack(head)
    if length > most_bytes:
        raise RuntimeError("the reading process sent an answer past its limits")
    body = pipe.read(length)
    if tag != b"R":
        return tag, body, []
    spec = msgspec.msgpack.decode(pipe.read(_LENGTH.unpack(pipe.read(_LENGTH.size))[0]), type=list[tuple[str, int]])
    if any(d not in _DTYPES or n < 0 for d, n in spec) or sum(np.dtype(d).itemsize * n for d, n in spec) > most_bytes:
        raise RuntimeError("the reading process sent arrays past its limits")
    arrays = [np.empty(n, dtype=d) for d, n in spec]
    for array in arrays:
        view = array.data.cast("B")
        got = 0
        while got < len(view):
            n = pipe.readinto(view[got:])  # type: ignore[attr-defined]
            if not n:
                raise RuntimeError("the reading process ended in the middle of its answer")
            got += n
    return tag, body, arrays


def _child(work: Callable[[], tuple[bytes, list[np.ndarray[Any, Any]]]], fd: int, parent: int,
           address_space_bytes: int | None, cpu_s: float) -> None:  # pragma: no cover - runs in the child
    """Run ``work`` under the limits and send what comes of it; never returns."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        warnings.simplefilter("ignore")
        end_with_parent(parent)
        _limit(address_space_bytes, cpu_s)
        gc.disable()
        answer: tuple[bytes, bytes, list[np.ndarray[Any, Any]]] = (b"M", b"", [])
        try:
            body, arrays = work()
            answer = (b"R", body, arrays)
        except MemoryError:
            pass  # sent once the handler has let go of what was built
        except NotPlainData as exc:
            answer = (b"E", msgspec.msgpack.encode(_Refused(str(exc), exc.refused, isinstance(exc, BudgetSpent))), [])
        _send(fd, *answer)
    except BaseException as exc:  # a failure of the reader itself: said, never swallowed
        with contextlib.suppress(BaseException):
            _send(fd, b"X", f"{type(exc).__name__}: {exc}".encode(), [])
        code = 1
    finally:
        os._exit(code)


def _send(fd: int, tag: bytes, body: bytes, arrays: list[np.ndarray[Any, Any]]) -> None:
    with os.fdopen(fd, "wb", buffering=0) as out:
        parts: list[bytes | memoryview] = [_HEAD.pack(tag, len(body)), body]
        if tag == b"R":
            spec = msgspec.msgpack.encode([(a.dtype.str, int(a.size)) for a in arrays])
            parts += [_LENGTH.pack(len(spec)), spec, *(a.data.cast("B") for a in arrays)]
        for part in parts:
            view = memoryview(part)
            while view:  # a pipe takes part of a large write at a time
                view = view[out.write(view) or 0:]


def _limit(address_space_bytes: int | None, cpu_s: float) -> None:  # pragma: no cover - runs in the child
    limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_CPU, max(1, int(cpu_s)))]
    if address_space_bytes is not None:
        limits.append((resource.RLIMIT_AS, address_space_bytes))
    for which, soft in limits:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        # CPU: the soft limit sends SIGXCPU, the hard one SIGKILL two seconds later
        hard = soft + 2 if which == resource.RLIMIT_CPU and hard == resource.RLIM_INFINITY else hard
        with contextlib.suppress(ValueError, OSError):  # a platform without the limit: the others still hold
            resource.setrlimit(which, (soft, hard))


def _address_space_bytes() -> int | None:
    """This process's virtual size (what a child starts with); None where the system does not say (and does not
    hold a process to ``RLIMIT_AS`` either: macOS)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def child_limits(budget: PickleBudget, size_bytes: int, *, c_unpickler: bool) -> Limits:
    """The limits of a child reading ``size_bytes`` of pickle: the C unpickler's memory allowance
    (``PickleBudget.c_memory_bytes``), or the whole memory budget for the streaming reader."""
    if c_unpickler and budget.c_memory_bytes(size_bytes) < budget.memory_bytes:
        memory = budget.c_memory_bytes(size_bytes)
        words = (f"{size_words(memory)} ({budget.memory_per_byte} bytes per byte of pickle and "
                 f"{size_words(budget.memory_floor_bytes)}; plain data takes 3 to 7)")
    else:
        memory = budget.memory_bytes
        words = (f"{size_words(memory)} (set {ENV_PICKLE_MEMORY_GIB} to change it: three quarters of the memory "
                 "available by default)")
    return Limits(memory_bytes=memory, cpu_s=budget.cpu_s(size_bytes), memory_words=words)
