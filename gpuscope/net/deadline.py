"""One deadline for a whole command, and the limits of each step of a remote transfer under it.

A command that talks to anything remote (a Prometheus, a trace URL, a Dask scheduler) gets one ``Deadline``; every
request, retry, read and wait of the command counts against it, so the command ends by then whatever the other side
does: silent, dripping one byte a second, or hanging in its TLS handshake. ``Timeouts`` adds the limits of each
step (connecting, and waiting for a byte), so a dead server is told in seconds rather than at the deadline.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

CONNECT_S = 10.0
"""How long a connection may take to open: the TCP connection, and the TLS handshake on top of it."""
READ_S = 30.0
"""How long a server may keep silent: for the first byte of its answer, and then between any two reads."""
COMMAND_S = 300.0
"""How long a command that reads anything remote (a trace URL, a Dask cluster) may take in all, unless
``--timeout`` says otherwise."""


class Deadline:
    """A moment by which a whole operation must end, shared by all its requests (and their retries).

    ``cancel()`` ends the requests in flight at once and makes later ones fail: one part of an operation failed,
    so the others need not finish. It travels to another process (a worker) as the seconds it has left.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        """The seconds the whole operation was given (what a message names)."""
        self._end = time.monotonic() + seconds
        self._cancelled = threading.Event()

    def __reduce__(self) -> tuple[object, tuple[float, float]]:
        # Monotonic clocks of two machines (a Dask worker's) cannot be compared: what is left travels.
        return _resumed, (self.seconds, self.left_s())

    def left_s(self) -> float:
        return self._end - time.monotonic()

    @property
    def expired(self) -> bool:
        return self.left_s() <= 0

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the operation is cancelled first; False (at once) when the sleep would end past
        the deadline or was cut short."""
        if seconds >= self.left_s():
            return False
        return not self._cancelled.wait(seconds)


def seconds_text(seconds: float) -> str:
    """Seconds as a message gives them: ``10 s``, ``0.25 s``, ``1.79 s`` (a limit cut short by the deadline)."""
    return f"{round(seconds, 2):g} s"


def _resumed(seconds: float, left_s: float) -> Deadline:
    deadline = Deadline(seconds)
    deadline._end = time.monotonic() + left_s
    return deadline


@dataclass(frozen=True)
class Timeouts:
    """The limits of one command's remote work: each step's, and the whole command's ``deadline``."""

    deadline: Deadline = field(default_factory=lambda: Deadline(COMMAND_S))
    connect_s: float = CONNECT_S
    read_s: float = READ_S

    def step_s(self, step_s: float) -> float:
        """A step's own limit, or what is left of the deadline when that is less (never below a millisecond)."""
        return max(0.001, min(step_s, self.deadline.left_s()))

    @classmethod
    def within(cls, seconds: float | None) -> Timeouts:
        """The default limits under a deadline of ``seconds`` from now (``COMMAND_S`` when None)."""
        return cls(deadline=Deadline(COMMAND_S if seconds is None else seconds))
