"""How long each gpuscope command takes to answer when it has little to read: interpreter start, imports, the work.

Each command runs ``--repeat`` times in a child process of its own (compiled bytecode, as pip leaves an installed
package; an empty store), next to the interpreter's own start (``python -c pass``) and ``import typer`` (the
command-line library alone), and once more under ``-X importtime`` to count the modules it loaded and which of the
heavy libraries among them. Wall and CPU time are the fastest of the runs (other work on the machine only ever adds
to them), with the median beside them.

    .venv/bin/python benchmarks/bench_startup.py [--repeat 10] [--json-out FILE]

The light commands' module lists are held by tests/cli/test_startup.py (modules, not clocks); the figures go in
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measuring import ROOT, child_env, measure  # noqa: E402 - a sibling script, not a package

HEAVY = ("numpy", "pandas", "pyarrow", "plotly", "dash", "torch", "distributed", "fsspec", "scipy")


def _hang_dumps(folder: Path) -> Path:
    """Two ranks' flight-recorder dumps (the JSON PyTorch writes): rank 1 never joined all_reduce #3."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank, last in ((0, "started"), (1, None)):
        entries = [{"collective_seq_id": seq, "p2p_seq_id": 0, "is_p2p": False, "profiling_name": "nccl:all_reduce",
                    "state": "completed" if seq < 3 else last, "retired": seq < 3,
                    "process_group": ["0", "default_pg"], "pg_id": 0, "input_sizes": [[1024]],
                    "input_dtypes": ["Float"], "output_sizes": [[1024]], "output_dtypes": ["Float"],
                    "time_created_ns": 1000 * seq, "record_id": seq} for seq in (1, 2, 3) if seq < 3 or last]
        doc = {"version": "2.10", "entries": entries, "pg_config": {}, "pg_status": {}}
        (folder / f"nccl_trace_rank_{rank}").write_text(json.dumps(doc))
    return folder


def commands(python: str, work: Path) -> list[tuple[str, list[str]]]:
    """(label, argv) of what is measured: the two floors, then the commands."""
    dumps = _hang_dumps(work / "dumps")
    gs = [python, "-m", "gpuscope"]
    return [
        ("python -c pass", [python, "-c", "pass"]),
        ("python -c 'import typer'", [python, "-c", "import typer"]),
        ("gpuscope --help", [*gs, "--help"]),
        ("gpuscope --version", [*gs, "--version"]),
        ("gpuscope runs", [*gs, "runs"]),
        ("gpuscope runs --json", [*gs, "runs", "--json"]),
        ("gpuscope prices", [*gs, "prices"]),
        ("gpuscope prices --json", [*gs, "prices", "--json"]),
        ("gpuscope hang DUMPS", [*gs, "hang", str(dumps)]),
        ("gpuscope hang DUMPS --json", [*gs, "hang", str(dumps), "--json"]),
        ("gpuscope analyze --help", [*gs, "analyze", "--help"]),
    ]


def loaded_modules(argv: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    """How many modules a run of ``argv`` imported, and which heavy libraries among them (``-X importtime``)."""
    run = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True,
                         cwd=ROOT, check=False)
    names = [line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines()
             if line.startswith("import time:") and "|" in line and "self [us]" not in line]
    heavy = sorted({n.split(".")[0] for n in names if n.split(".")[0] in HEAVY})
    return len(names), heavy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=10, help="runs of each command (fastest and median shown)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter gpuscope is installed in")
    parser.add_argument("--json-out", type=Path, default=None, help="also write every measurement here as JSON")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpuscope-startup-"))
    try:
        env = child_env(work)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        env["COLUMNS"] = "120"
        rows = []
        print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
              f"Python {sys.version.split()[0]}, best of {args.repeat}")
        print(f"{'command':30s} {'wall':>7s} {'(median)':>9s} {'cpu':>7s} {'(median)':>9s} {'load':>5s} "
              f"{'modules':>8s}  heavy")
        for label, argv in commands(args.python, work):
            runs = [measure(argv, env=env) for _ in range(args.repeat)]
            modules, heavy = loaded_modules(argv, env)
            wall = [m.wall_s for m in runs]
            cpu = [m.cpu_s for m in runs]
            row = {"command": label, "wall_s": min(wall), "wall_median_s": statistics.median(wall),
                   "cpu_s": min(cpu), "cpu_median_s": statistics.median(cpu),
                   "load_avg": statistics.median(m.load_avg for m in runs), "modules": modules, "heavy": heavy,
                   "exit_codes": sorted({m.rc for m in runs})}
            rows.append(row)
            print(f"{label:30s} {row['wall_s']:6.3f}s {row['wall_median_s']:8.3f}s {row['cpu_s']:6.3f}s "
                  f"{row['cpu_median_s']:8.3f}s {row['load_avg']:5.1f} {modules:8d}  {' '.join(heavy) or '-'}",
                  flush=True)
        if args.json_out:
            args.json_out.write_text(json.dumps(rows, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
