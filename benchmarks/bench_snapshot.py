"""`gpuscope memory` on a large memory snapshot: wall time, CPU time and peak memory, against the standard
unpickler loading the same file (what a tool that holds every object needs, and which would also run any code the
pickle names).

The snapshot is made here, as PyTorch writes one: ``--actions`` allocator actions (alloc and free pairs), each with
a 20-frame stack out of a few hundred shared ones, pickled with protocol 4.

    .venv/bin/python benchmarks/bench_snapshot.py --actions 2000000     # about 100 MB of pickle
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from measuring import figure, measure

STACKS = 300
FRAMES = 2000


def write_snapshot(path: Path, actions: int) -> None:
    frames = [{"name": f"fn{i}", "filename": f"/work/pkg/module{i % 37}.py", "line": i} for i in range(FRAMES)]
    stacks = [[frames[(j * 13 + k) % FRAMES] for k in range(20)] for j in range(STACKS)]
    trace: list[dict[str, Any]] = [
        {"action": "alloc" if i % 2 == 0 else "free_requested", "addr": 0x7000_0000_0000 + (i // 2 % 4096) * 2**20,
         "size": 2**20, "stream": 0, "time_us": 1_780_000_000_000_000 + i, "frames": stacks[i % STACKS],
         "compile_context": "N/A", "user_metadata": ""} for i in range(actions)]
    doc = {"segments": [{"device": 0, "address": 0x7000_0000_0000, "total_size": 2**32, "allocated_size": 0,
                         "requested_size": 0, "is_expandable": False, "frames": [],
                         "blocks": [{"address": 0x7000_0000_0000, "size": 2**32, "requested_size": 0,
                                     "state": "inactive", "frames": []}]}],
           "device_traces": [trace], "allocator_settings": {"expandable_segments": False},
           "external_annotations": []}
    with path.open("wb") as f:
        pickle.dump(doc, f, protocol=4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=2_000_000)
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write is not None:
        write_snapshot(args.write, args.actions)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.pickle"
        # Written by a child: this process stays small, and the peak memory a child reports (which Linux carries
        # over from its parent at fork) is its own.
        subprocess.run([sys.executable, __file__, "--actions", str(args.actions), "--write", str(path)], check=True)
        size = path.stat().st_size
        home = Path(tmp) / "home"
        env = {"GPUSCOPE_HOME": str(home), "PATH": "/usr/bin:/bin"}
        ours = measure([sys.executable, "-m", "gpuscope", "memory", str(path), "--json", "--no-save"],
                       env={**env, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
        theirs = measure([sys.executable, "-c", f"import pickle; pickle.load(open({str(path)!r}, 'rb'))"], env=env)
    print(f"snapshot: {args.actions:,} actions, {size / 1e6:.1f} MB of pickle")
    for label, m in (("gpuscope memory (safe, streamed)", ours), ("pickle.load (holds every object)", theirs)):
        print(f"{label:36} wall {figure(m.wall_s, '.2f', ' s')}, CPU {figure(m.cpu_s, '.2f', ' s')}, "
              f"peak {figure(m.peak_bytes / 1e6, '.0f', ' MB')}, load {m.load_avg:.1f}"
              + (f", failed: {m.error}" if m.rc else ""))


if __name__ == "__main__":
    main()
