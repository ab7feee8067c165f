"""A target that leaves a profiler trace in the folder of the gpuscope run that started it, as
``gpuscope.torch.profile()`` does, then works a little and exits.

Usage: leave_trace.py TRACE [SECONDS]  (GPUSCOPE_HOME and GPUSCOPE_RUN_ID come from `gpuscope run`). Once the
trace is in place it prints "trace left", then spins SECONDS (default 1) so the run has samples.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    folder = Path(os.environ["GPUSCOPE_HOME"]) / "runs" / os.environ["GPUSCOPE_RUN_ID"]
    folder.mkdir(parents=True, exist_ok=True)
    source = Path(sys.argv[1])
    shutil.copyfile(source, folder / f"rank0.{time.time_ns()}.pt.trace.json{'.gz' if source.suffix == '.gz' else ''}")
    print("trace left", flush=True)
    end = time.monotonic() + (float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
    while time.monotonic() < end:
        sum(i * i for i in range(1000))
