"""Time and peak memory of ``gpuscope analyze`` against the number of ranks it reads.

One folder of gzipped ranks per count, all built from the same real rank by make_large_trace.py; on each,
``gpuscope analyze DIR --json --no-save`` runs in a child whose whole process tree is measured (``measuring``),
and the table gives time per rank and peak memory relative to the fewest ranks.

    .venv/bin/python benchmarks/bench_scaling.py --ranks 8,64,256 [--large-mb 50] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measuring import (  # noqa: E402 - a sibling script, not a package
    HERE,
    Case,
    CaseResult,
    add_common_arguments,
    best,
    child_env,
    cli_cmd,
    div,
    figure,
    json_bytes,
    measure,
    trace_files,
)


def prepare_scaling(data_dir: Path, ranks: list[int], mb: float) -> list[Case]:
    """One folder of gzipped ranks per count, all built from the same real rank (make_large_trace.py, with
    distributedInfo after the events so that hundreds of ranks share one compression)."""
    cases = []
    for n in ranks:
        out = data_dir / f"scale_{n}x{mb:g}MB_gz"
        if not out.exists():
            print(f"building {n} ranks in {out} ...", file=sys.stderr, flush=True)
            partial = out.with_name(out.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            subprocess.run([sys.executable, str(HERE / "make_large_trace.py"), str(partial), "--ranks", str(n),
                            "--mb", str(mb), "--gzip", "--info-last"], check=True, stdout=subprocess.DEVNULL)
            partial.rename(out)
        files = trace_files(out)
        # Every rank holds the same events: one file's JSON counted, times the ranks (a few digits apart).
        cases.append(Case(name=f"{n}_ranks_x{mb:g}MB", path=out, fmt="gz", files=len(files),
                          json_bytes=json_bytes(files[:1]) * len(files)))
    return cases


def run_scaling(cases: list[Case], gpuscope: str, *, repeat: int, env: dict[str, str]) -> list[CaseResult]:
    """`gpuscope analyze DIR --json --no-save` on each count, the whole process tree measured."""
    results = []
    for case in cases:
        cli = cli_cmd(gpuscope, case.path)
        print(f"  {case.name} gpuscope ...", file=sys.stderr, flush=True)
        results.append(CaseResult(case=case, runs={"gpuscope": best([measure(cli, env=env)
                                                                      for _ in range(repeat)])}))
    return results


def print_scaling(results: list[CaseResult]) -> dict[str, Any]:
    """Time and peak memory against the number of ranks, relative to the fewest."""
    print("\nScaling in ranks: `gpuscope analyze DIR --json --no-save`, whole process tree; per rank = wall / ranks;"
          "\nrelative to the fewest ranks (targets: peak <= 1.25x, time per rank <= 1x).")
    head = (f"{'ranks':>6}{'JSON GB':>9} | {'wall':>8}{'cpu':>8}{'peak MB':>9}{'load':>6} | {'s/rank':>7}"
            f"{'peak x':>8}{'s/rank x':>10}")
    print(head + "\n" + "-" * len(head))
    rows: list[dict[str, Any]] = []
    for r in results:
        m = r.runs["gpuscope"]
        ok = m.rc == 0
        rows.append({"ranks": r.case.files, "json_gb": r.case.json_bytes / 1e9, "wall_s": m.wall_s if ok else None,
                     "cpu_s": m.cpu_s if ok else None, "peak_mb": m.peak_bytes / 1e6 if ok else None,
                     "load_avg": m.load_avg, "error": m.error})
    first = rows[0]
    for row in rows:
        row["s_per_rank"] = div(row["wall_s"], row["ranks"])
        row["peak_x"] = div(row["peak_mb"], first["peak_mb"])
        row["s_per_rank_x"] = div(row["s_per_rank"], first["s_per_rank"] if first["wall_s"] else None)
        print(f"{row['ranks']:>6}{row['json_gb']:>9.2f} | {figure(row['wall_s'], '.2f', 's'):>8}"
              f"{figure(row['cpu_s'], '.2f', 's'):>8}{figure(row['peak_mb'], '.0f'):>9}{row['load_avg']:>6.1f} | "
              f"{figure(row['s_per_rank'], '.3f'):>7}{figure(row['peak_x'], '.2f', 'x'):>8}"
              f"{figure(row['s_per_rank_x'], '.2f', 'x'):>10}" + (f"  failed: {row['error']}" if row["error"] else ""))
    return {"scaling": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="8,64,256", metavar="N,N,...",
                        help="gpuscope alone on folders of N gzipped large ranks each (default 8,64,256)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if not Path(args.gpuscope).exists():
        print(f"bench_scaling: {args.gpuscope}: no such gpuscope CLI (pip install -e . first)", file=sys.stderr)
        return 2
    counts = [int(n) for n in args.ranks.split(",")]
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="gpuscope-bench-"))
    env = child_env(data_dir)
    try:
        results = run_scaling(prepare_scaling(data_dir, counts, args.large_mb), args.gpuscope,
                              repeat=max(1, args.repeat), env=env)
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)
    print(f"\ngpuscope analyze by number of ranks, {time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}; 1-minute load average shown per measurement")
    summary = print_scaling(results)
    if args.json_out:
        args.json_out.write_text(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
