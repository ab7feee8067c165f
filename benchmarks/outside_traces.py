"""Run gpuscope's trace commands over traces from other projects and count what each ended as.

Every trace file under FOLDER (``*.json``, ``*.json.gz``; duplicates by content counted once) and every folder
named with ``--ranks`` (a folder of rank files, analysed as one job) goes through ``gpuscope analyze PATH
--no-save``, ``analyze --json``, ``ops`` and ``timeline -o TMP``, each in its own process as a user runs it. Each
command ends as **ok** (exit 0), a **user error** (exit 2 and one line, no traceback), or a **crash** (any other
exit, or a traceback: exit 3 is gpuscope's internal error). One JSON line per (trace, command) goes to ``--out``
(exit code, seconds, stderr, the report for ``--json``), and a table of the counts by source folder is printed.

    .venv/bin/python benchmarks/outside_traces.py /tmp/outside/files --ranks /tmp/outside/dlrm --out results.jsonl

The traces themselves stay outside the repository: docs/reliability.md ("Traces from other projects") names the
repositories and commits they were taken from.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

COMMANDS: dict[str, list[str]] = {
    "analyze": ["analyze", "{path}", "--no-save"],
    "json": ["analyze", "{path}", "--no-save", "--json"],
    "ops": ["ops", "{path}"],
    "timeline": ["timeline", "{path}", "-o", "{out}"],
}


def trace_files(folder: Path) -> list[Path]:
    """The trace files under ``folder``, one per distinct content, in path order."""
    seen: set[str] = set()
    out: list[Path] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            out.append(path)
    return out


def outcome(rc: int, stderr: str) -> str:
    if "Traceback" in stderr or rc not in (0, 2):
        return "crash"
    return "ok" if rc == 0 else "user error"


def run(path: Path, command: str, home: Path, timeout_s: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as out:
        argv = [a.format(path=path, out=out) for a in COMMANDS[command]]
        env = {**os.environ, "GPUSCOPE_HOME": str(home), "COLUMNS": "160"}
        t0 = time.monotonic()
        try:
            p = subprocess.run([sys.executable, "-m", "gpuscope", *argv], capture_output=True, text=True, env=env,
                               timeout=timeout_s)
            rc, stdout, stderr = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            rc, stdout, stderr = -1, "", f"past {timeout_s:.0f} s"
        seconds = time.monotonic() - t0
    return {"path": str(path), "command": command, "rc": rc, "outcome": outcome(rc, stderr), "s": round(seconds, 2),
            "stderr": stderr[-4000:], "report": stdout if command == "json" and rc == 0 else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where the trace files are (searched recursively)")
    parser.add_argument("--ranks", type=Path, action="append", default=[], help="a folder of rank files (repeat)")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, one per trace and command")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    args = parser.parse_args()
    cases = [*trace_files(args.folder), *args.ranks]
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    with tempfile.TemporaryDirectory() as home, args.out.open("w") as out:
        for path in cases:
            source = "ranks" if path in args.ranks else str(path.relative_to(args.folder).parts[0])
            for command in COMMANDS:
                result = run(path, command, Path(home), args.timeout_s)
                out.write(json.dumps(result) + "\n")
                counts[f"{source} {command}"][str(result["outcome"])] += 1
    for key in sorted(counts):
        print(f"{key:60} " + ", ".join(f"{n} {k}" for k, n in sorted(counts[key].items())))


if __name__ == "__main__":
    main()
