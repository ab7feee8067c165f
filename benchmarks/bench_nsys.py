"""Time ``gpuscope analyze`` on an Nsight Systems export beside a Kineto trace of the same job, in one run.

The export: the bundled DDP profile (sample_traces/nsys/ddp53_profile.sqlite, 2 ranks) scaled up by repeating its
rows back to back (each copy's times shifted by the capture's span, its correlation ids moved past the previous
copy's) until the file holds ``--mb`` MB. The Kineto trace of the same job: each rank of that export as gpuscope
reads it, written as Kineto writes a trace (``gpuscope.reports.timeline``: the same events, categories and
args), one file per rank. So both sides hold the same events, and the two times compare the readers and the
analysis on them.

Each side runs ``gpuscope analyze PATH --json --no-save`` in a child process (``measuring.measure``: wall time,
CPU time and peak memory of the whole process tree, interpreter start included), ``--repeat`` times, the fastest
kept; and once more in-process, timing the reading alone (``gpuscope.traces.load``).

    .venv/bin/python benchmarks/bench_nsys.py [--mb 100] [--repeat 3] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measuring import ROOT, Measured, best, cli_cmd, figure, measure  # noqa: E402 - a sibling script

SAMPLE = ROOT / "sample_traces" / "nsys" / "ddp53_profile.sqlite"
TIMED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
         "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")
"""The tables whose rows are copied: every one with times."""


def make_export(out: Path, *, mb: float) -> int:
    """The sample scaled up to about ``mb`` MB at ``out``; the number of copies of its rows."""
    shutil.copyfile(SAMPLE, out)
    with sqlite3.connect(out) as conn:
        lo, hi = conn.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
        span = hi - lo + 1_000_000
        corr = conn.execute("SELECT max(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] + 1
        originals = {t: conn.execute(f"SELECT max(rowid) FROM {t}").fetchone()[0] for t in TIMED}
        columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in TIMED}
        copies = 1
        while out.stat().st_size < mb * 1e6:
            for table in TIMED:
                cols = columns[table]
                shifted = [f"{c} + {copies * span}" if c in ("start", "end") else
                           f"{c} + {copies * corr}" if c == "correlationId" else c for c in cols]
                conn.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(shifted)} FROM {table} "
                             f"WHERE rowid <= {originals[table]}")
            conn.commit()
            copies += 1
    return copies


def make_kineto(export: Path, folder: Path) -> None:
    """Each rank of ``export`` as a Kineto trace file in ``folder``."""
    from dataclasses import replace

    import numpy as np

    from gpuscope.analyzers.trace.step_pick import StepWindow
    from gpuscope.model.trace import Kind
    from gpuscope.reports.timeline import step_trace
    from gpuscope.traces.loader import read_traces

    folder.mkdir(parents=True, exist_ok=True)
    for trace in read_traces(str(export)):
        # Every ProfilerStep#N as a record_function range, as newer PyTorch writes them (a step file keeps one
        # step's marker; the reader makes each a step again)
        kind = np.where(trace.events.kind == Kind.STEP, np.uint8(Kind.USER_ANNOTATION), trace.events.kind)
        trace = replace(trace, events=replace(trace.events, kind=kind.astype(np.uint8)))
        ev = trace.events
        whole = StepWindow(rank=trace.rank, name="0", start_ns=int(ev.ts_ns.min()), end_ns=int(ev.end_ns.max()) + 1,
                           why=("slowest",))
        doc = step_trace(trace, whole)
        doc["distributedInfo"] = {"rank": trace.rank, "world_size": trace.world_size or 1, "backend": "nccl"}
        (folder / f"rank{trace.rank}.pt.trace.json").write_text(json.dumps(doc))


def read_cpu_s(path: Path) -> float:
    """CPU seconds of reading ``path`` in this process (one worker: the CPU time is the reading's alone, whatever
    else the machine runs)."""
    from gpuscope.traces import load

    t0 = time.process_time()
    load(path, jobs=1)
    return time.process_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=100.0, help="Size of the export to build (MB).")
    parser.add_argument("--repeat", type=int, default=3, help="Runs of each side; the fastest is kept.")
    parser.add_argument("--data-dir", type=Path, help="Keep the built files here (default: a temporary folder).")
    parser.add_argument("--gpuscope", default=str(Path(sys.executable).parent / "gpuscope"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-nsys-") as tmp:
        data = args.data_dir or Path(tmp)
        data.mkdir(parents=True, exist_ok=True)
        export, kineto = data / "ddp_large.sqlite", data / "ddp_large_kineto"
        if not export.exists():
            copies = make_export(export, mb=args.mb)
            print(f"built {export.name}: {copies} copies of the sample, {export.stat().st_size / 1e6:.0f} MB")
        if not kineto.exists():
            make_kineto(export, kineto)
        json_mb = sum(p.stat().st_size for p in kineto.iterdir()) / 1e6
        rows: list[tuple[str, float, Measured, float]] = []
        for label, path, size in (("nsys export", export, export.stat().st_size / 1e6),
                                  ("kineto json", kineto, json_mb)):
            runs = [measure(cli_cmd(args.gpuscope, path)) for _ in range(args.repeat)]
            failed = next((r for r in runs if r.rc != 0), None)
            if failed is not None:
                raise SystemExit(f"{label}: gpuscope analyze failed: {failed.error}")
            rows.append((label, size, best(runs), min(read_cpu_s(path) for _ in range(args.repeat))))
    print(f"{'input':<12} {'MB':>7} {'analyze wall':>13} {'cpu':>8} {'peak MB':>8} {'read cpu':>9}")
    for label, size, m, read in rows:
        print(f"{label:<12} {size:7.0f} {figure(m.wall_s, '.2f', ' s'):>13} {figure(m.cpu_s, '.2f', ' s'):>8} "
              f"{m.peak_bytes / 1e6:8.0f} {read:8.2f}s")
    (_, _, nsys_m, nsys_read), (_, _, kin_m, kin_read) = rows
    print(f"nsys / kineto: analyze wall {nsys_m.wall_s / kin_m.wall_s:.2f}x, cpu {nsys_m.cpu_s / kin_m.cpu_s:.2f}x, "
          f"reading cpu {nsys_read / kin_read:.2f}x (load average {nsys_m.load_avg:.1f} at the start)")


if __name__ == "__main__":
    main()
