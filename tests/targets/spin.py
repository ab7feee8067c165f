"""A CPU-bound Python target: the main thread spins, a helper thread sleeps. Prints its work rate.

Usage: spin.py [SECONDS]  (default: until killed). About every 0.25 s it prints
"window START_NS END_NS LOOPS CPU_NS" (wall-clock ns; CPU_NS the main thread's CPU time in the
window), so a benchmark can compare its throughput over any stretch of time, with and without
gpuscope attached, per second of wall time and per second of CPU it got. Once its main thread is in
``spin`` (and its helper thread started) it says "ready" on stderr: a test samples it after that,
never after a guessed sleep.
"""

from __future__ import annotations

import sys
import threading
import time

WINDOW_NS = 250_000_000


def napper() -> None:
    while True:
        time.sleep(0.05)


def spin(seconds: float | None) -> None:
    print("ready", file=sys.stderr, flush=True)
    end = None if seconds is None else time.time_ns() + int(seconds * 1e9)
    window_start, cpu_start, loops = time.time_ns(), time.thread_time_ns(), 0
    while end is None or time.time_ns() < end:
        sum(i * i for i in range(1000))
        loops += 1
        now = time.time_ns()
        if now - window_start >= WINDOW_NS:
            cpu = time.thread_time_ns()
            print(f"window {window_start} {now} {loops} {cpu - cpu_start}", flush=True)
            window_start, cpu_start, loops = now, cpu, 0


if __name__ == "__main__":
    threading.Thread(target=napper, name="napper", daemon=True).start()
    spin(float(sys.argv[1]) if len(sys.argv) > 1 else None)
