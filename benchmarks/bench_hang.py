"""`gpuscope hang` on large flight-recorder dumps: wall time, CPU time and peak memory.

The dumps are made here, ``--dumps`` of them with ``--entries`` entries each, shaped like the real gloo dumps in
sample_traces/gloo_4rank/hang (one stack frame each), rank 1 one all_reduce behind the others. ``--form``:

- ``json``: as ``_dump_fr_trace_json`` writes them;
- ``pickle``: as PyTorch's C++ pickler writes ``_dump_fr_trace``: each string memoized once by value, containers
  not memoized (Python's pickler in fast mode, with shared strings, writes the same opcodes);
- ``fresh``: Python's pickler with every string, list and dict a fresh object, each memoized on its own: the worst a
  file can do to a streaming reader's memo (no PyTorch writes it).

    .venv/bin/python benchmarks/bench_hang.py --form pickle --entries 500000 --dumps 1   # about 250 MB of pickle
"""

from __future__ import annotations

import argparse
import io
import json
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from measuring import figure, measure


def _entries(n: int, last: int, fresh: bool) -> list[dict[str, Any]]:
    def s(text: str) -> str:
        return "".join([text[:1], text[1:]]) if fresh else text  # a new object, or the one shared string

    return [{"record_id": i, "pg_id": 0, "process_group": (s("0"), s("default_pg")), "thread_name": s("python"),
             "thread_id": s("140711007415168"), "collective_seq_id": i + 1, "p2p_seq_id": 0, "op_id": i + 1,
             "profiling_name": s("nccl:all_reduce"), "time_created_ns": 1_796_497_233_023_294_663 + i,
             "input_sizes": [[65536]], "input_dtypes": [s("Float")], "output_sizes": [[65536]],
             "output_dtypes": [s("Float")], "state": s("completed" if i < last - 1 else "started"),
             "time_discovered_started_ns": None, "time_discovered_completed_ns": None, "retired": i < last - 1,
             "timeout_ms": 600_000, "is_p2p": False,
             "frames": [{"name": s("all_reduce"), "filename": s("distributed_c10d.py"), "line": 3245}]}
            for i in range(last)]


def write_dumps(folder: Path, *, entries: int, dumps: int, form: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(dumps):
        last = entries - 1 if rank == 1 else entries
        doc = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": list(range(dumps))}},
               "pg_status": {"0": {"last_completed_collective": last - 1}},
               "entries": _entries(entries, last, fresh=form == "fresh")}
        path = folder / f"rank_{rank}"
        if form == "json":
            path.write_text(json.dumps(doc))
            continue
        buf = io.BytesIO()
        pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.fast = form == "pickle"
        pickler.dump(doc)
        path.write_bytes(buf.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--form", choices=("json", "pickle", "fresh"), default="pickle")
    parser.add_argument("--entries", type=int, default=500_000)
    parser.add_argument("--dumps", type=int, default=1)
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write is not None:
        write_dumps(args.write, entries=args.entries, dumps=args.dumps, form=args.form)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "dumps"
        # Written by a child: this process stays small, and the peak memory a child reports is its own.
        subprocess.run([sys.executable, __file__, "--form", args.form, "--entries", str(args.entries), "--dumps",
                        str(args.dumps), "--write", str(folder)], check=True)
        size = sum(p.stat().st_size for p in folder.iterdir())
        env = {"GPUSCOPE_HOME": str(Path(tmp) / "home"), "PATH": "/usr/bin:/bin",
               "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        m = measure([sys.executable, "-m", "gpuscope", "hang", str(folder), "--json"], env=env)
    print(f"{args.dumps} {args.form} dump(s) of {args.entries:,} entries, {size / 1e6:.0f} MB: wall "
          f"{figure(m.wall_s, '.1f', ' s')}, CPU {figure(m.cpu_s, '.1f', ' s')}, peak "
          f"{figure(m.peak_bytes / 1e6, '.0f', ' MB')}, load {m.load_avg:.1f}"
          + (f", failed: {m.error}" if m.rc else ""))


if __name__ == "__main__":
    main()
