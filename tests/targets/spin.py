"""A CPU-bound Python target: the main thread spins, a helper thread sleeps. Prints its work rate.

Usage: spin.py [SECONDS]  (default: until killed). Every second it prints "rate N" (loops per second)
so a benchmark can compare its throughput with and without gpuscope attached.
"""

from __future__ import annotations

import sys
import threading
import time


def napper() -> None:
    while True:
        time.sleep(0.05)


def spin(seconds: float | None) -> None:
    end = None if seconds is None else time.monotonic() + seconds
    window_start, loops = time.monotonic(), 0
    while end is None or time.monotonic() < end:
        sum(i * i for i in range(1000))
        loops += 1
        now = time.monotonic()
        if now - window_start >= 1.0:
            print(f"rate {loops / (now - window_start):.1f}", flush=True)
            window_start, loops = now, 0


if __name__ == "__main__":
    threading.Thread(target=napper, name="napper", daemon=True).start()
    spin(float(sys.argv[1]) if len(sys.argv) > 1 else None)
