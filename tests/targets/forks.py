"""A target that forks a child which execs into another Python program, then execs into one itself (a test target),
as a launcher script handing over to the real job does.

Usage: forks.py SPIN_SECONDS GO_FILE. Waits (spinning) until GO_FILE exists, so a recording can start first; then
forks and prints the child's pid. The child execs into ``spin.py SPIN_SECONDS`` at once, this process after 1 s of
its own work: the same pids, new programs.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

SPIN = str(Path(__file__).resolve().with_name("spin.py"))


def work(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(i * i for i in range(1000))


if __name__ == "__main__":
    seconds, go = sys.argv[1], Path(sys.argv[2])
    while not go.exists():
        work(0.05)
    child = os.fork()
    if child == 0:
        os.execv(sys.executable, [sys.executable, SPIN, seconds])
    print(child, flush=True)
    work(1.0)
    os.execv(sys.executable, [sys.executable, SPIN, seconds])
