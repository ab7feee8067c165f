"""A target that records the signals it receives (a test target).

Usage: signals.py OUT_FILE [LINGER_S]. Writes "ready" to OUT_FILE once its handlers are in place, then one line per
SIGINT or SIGTERM received ("SIGTERM"), flushed at once. After the first it stays LINGER_S seconds more (default
1.0), so a second delivery of the same signal would be seen, then exits with 128 + the first signal's number, as a
process ended by it would report through a shell.
"""

from __future__ import annotations

import os
import signal
import sys
import time

received: list[int] = []


def record(signum: int, _frame: object) -> None:
    received.append(signum)
    with open(sys.argv[1], "a") as out:
        out.write(signal.Signals(signum).name + "\n")


if __name__ == "__main__":
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, record)
    with open(sys.argv[1], "a") as out:
        out.write(f"ready {os.getpid()}\n")
    linger_s = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    deadline = time.monotonic() + 120
    while not received and time.monotonic() < deadline:
        time.sleep(0.02)
    end = time.monotonic() + linger_s
    while time.monotonic() < end:
        time.sleep(0.02)
    sys.exit(128 + received[0] if received else 3)
