"""`gpuscope memory` on a large memory snapshot against the standard unpickler loading the same file, side by side
in one run: wall time, CPU time and peak memory of each (its whole process tree), and their ratios; and the
hostile pickles the reader's budgets stop.

Two snapshots, each as PyTorch writes one (protocol 4):

- ``--actions N``: N allocator actions (alloc and free pairs), each with a 20-frame stack out of 300 shared ones;
- ``--real K``: the allocator actions of a real transformer's training step (sample_traces/memory_snapshots,
  19,464 actions) K times over, each with its own frames list as PyTorch pickles them, times shifted.

``pickle.load`` holds every object (and would run any code the pickle names); ``gpuscope memory FILE --json
--no-save`` reads the same file as plain data and analyses it. Each runs in a process of its own, alternately,
``--repeat`` times; the best wall time of each is kept (``measuring.best``).

    .venv/bin/python benchmarks/bench_snapshot.py --actions 2000000 --real 28 --bombs --repeat 2
"""

from __future__ import annotations

import argparse
import gzip
import pickle
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

from measuring import Measured, best, figure, measure

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "sample_traces" / "memory_snapshots" / "cs336_training_step.pickle.gz"
STACKS = 300
FRAMES = 2000


def write_synthetic(path: Path, actions: int) -> None:
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


def write_real(path: Path, times: int) -> None:
    """The real snapshot's trace ``times`` times over (the standard unpickler reads the sample: it is ours)."""
    doc = pickle.loads(gzip.decompress(REAL.read_bytes()))
    (trace,) = doc["device_traces"]
    span = trace[-1]["time_us"] - trace[0]["time_us"] + 1
    doc["device_traces"] = [[{**e, "time_us": e["time_us"] + k * span, "frames": list(e["frames"])}
                             for k in range(times) for e in trace]]
    with path.open("wb") as f:
        pickle.dump(doc, f, protocol=4)


def write_bombs(folder: Path) -> list[Path]:
    """A 1 MB gzip of 1 GiB (a list of small ints under ``segments``), 9 bytes with a memo index of 2**26, and 404
    bytes of memo indices 2**20 apart."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    ints = b"K\x01" * (1 << 20)
    with (folder / "bomb.pickle.gz").open("wb") as f:
        f.write(packer.compress(b"\x80\x04}(\x8c\x08segments]("))
        for _ in range(512):
            f.write(packer.compress(ints))
        f.write(packer.compress(b"eu.") + packer.flush())
    (folder / "memo.pickle").write_bytes(b"\x80\x04Nr\x00\x00\x00\x04.")
    (folder / "jumps.pickle").write_bytes(
        b"\x80\x04N" + b"".join(b"r" + (i << 20).to_bytes(4, "little") for i in range(1, 81)) + b".")
    return [folder / "bomb.pickle.gz", folder / "memo.pickle", folder / "jumps.pickle"]


def _gpuscope(path: Path, home: Path) -> list[str]:
    return [sys.executable, "-m", "gpuscope", "memory", str(path), "--json", "--no-save"]


def side_by_side(path: Path, home: Path, repeat: int) -> tuple[Measured, Measured]:
    env = {"GPUSCOPE_HOME": str(home), "PATH": "/usr/bin:/bin"}
    ours: list[Measured] = []
    theirs: list[Measured] = []
    for _ in range(repeat):
        ours.append(measure(_gpuscope(path, home), env={**env, "PYTHONPATH": str(ROOT)}))
        theirs.append(measure([sys.executable, "-c", f"import pickle; pickle.load(open({str(path)!r}, 'rb'))"],
                              env=env))
    return best(ours), best(theirs)


def report(label: str, size: int, ours: Measured, theirs: Measured) -> None:
    print(f"\n{label}: {size / 1e6:.1f} MB of pickle")
    for name, m in (("gpuscope memory (plain data, analysed)", ours), ("pickle.load (every object, any code run)",
                                                                       theirs)):
        print(f"  {name:42} wall {figure(m.wall_s, '.2f', ' s')}, CPU {figure(m.cpu_s, '.2f', ' s')}, "
              f"peak {figure(m.peak_bytes / 1e6, '.0f', ' MB')}, load {m.load_avg:.1f}"
              + (f", failed: {m.error}" if m.rc else ""))
    print(f"  {'gpuscope / pickle.load':42} wall {ours.wall_s / theirs.wall_s:.2f}x, CPU "
          f"{ours.cpu_s / theirs.cpu_s:.2f}x, peak {ours.peak_bytes / theirs.peak_bytes:.2f}x")


def bombs(folder: Path, home: Path) -> None:
    print("\nhostile pickles (gpuscope memory FILE --json --no-save):")
    for path in write_bombs(folder):
        run = subprocess.run(_gpuscope(path, home), capture_output=True, text=True,
                             env={"GPUSCOPE_HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
        m = measure(_gpuscope(path, home), env={"GPUSCOPE_HOME": str(home), "PATH": "/usr/bin:/bin",
                                                "PYTHONPATH": str(ROOT)})
        print(f"  {path.name} ({path.stat().st_size:,} bytes): exit {run.returncode}, wall "
              f"{figure(m.wall_s, '.2f', ' s')}, peak {figure(m.peak_bytes / 1e6, '.0f', ' MB')}: "
              f"{run.stderr.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=2_000_000, help="the synthetic snapshot's actions (0: none)")
    parser.add_argument("--real", type=int, default=0, help="the real snapshot's trace this many times (0: none)")
    parser.add_argument("--bombs", action="store_true", help="also the hostile pickles")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write is not None:
        write_real(args.write, args.real) if args.real else write_synthetic(args.write, args.actions)
        return
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        for flag, count, label in (("--actions", args.actions, f"{args.actions:,} synthetic actions"),
                                   ("--real", args.real, f"the real training step's trace {args.real} times")):
            if not count:
                continue
            path = Path(tmp) / "snapshot.pickle"
            # Written by a child: this process stays small, and the peak memory a child reports (which Linux
            # carries over from its parent at fork) is its own.
            other = "--real" if flag == "--actions" else "--actions"
            subprocess.run([sys.executable, __file__, flag, str(count), other, "0", "--write", str(path)],
                           check=True)
            ours, theirs = side_by_side(path, home, args.repeat)
            report(label, path.stat().st_size, ours, theirs)
            path.unlink()
        if args.bombs:
            bombs(Path(tmp), home)


if __name__ == "__main__":
    main()
