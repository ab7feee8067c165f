"""How the analyze benchmarks measure a process: its wall time, the CPU time and peak memory of its whole process
tree, and the one line of JSON it reports; the trace cases they run on, and the figures' formatting.

Shared by ``bench_analyze.py`` (gpuscope against Holistic Trace Analysis) and ``bench_scaling.py`` (gpuscope
against the number of ranks). Only the standard library is imported at the top: ``analyze_children.py`` reads
``RESULT_MARK`` and ``trace_files`` from here under HTA's interpreter.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHILDREN_SCRIPT = HERE / "analyze_children.py"
"""The programs measured (the decode ceiling, gpuscope phase by phase, HTA), each run in a child of its own."""
RESULT_MARK = "BENCH_RESULT "
SAMPLE_INTERVAL_S = 0.05


def trace_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith((".json", ".json.gz")))


# --- measuring a child ---------------------------------------------------------------------------------------


def _pss_bytes(pid: int) -> int | None:
    """Proportional set size: pages shared after fork() are split among the processes sharing them,
    so a parent and its forked workers add up to what they really hold (RSS would count the shared
    interpreter and libraries once per worker)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class TreeSampler(threading.Thread):
    """Samples the memory of a process and all its descendants every SAMPLE_INTERVAL_S, keeping the peak of
    their sum (PSS where /proc gives it, else RSS). Sampling can miss a spike shorter than the interval, so
    ``measure`` also takes the exact peak RSS of the largest single process from wait4() and reports the larger."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_bytes = 0
        self.processes_seen: set[int] = set()
        self._stop_event = threading.Event()

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop_event.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            total = 0
            for p in procs:
                self.processes_seen.add(p.pid)
                size = _pss_bytes(p.pid)
                if size is None:
                    try:
                        size = p.memory_info().rss
                    except psutil.Error:
                        size = 0
                total += size
            self.peak_bytes = max(self.peak_bytes, total)
            self._stop_event.wait(SAMPLE_INTERVAL_S)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


@dataclass
class Measured:
    wall_s: float
    cpu_s: float
    """User + system CPU time of the child and every descendant it waited for (its worker processes)."""
    load_avg: float
    """The machine's 1-minute load average when the child started: other work competing for the CPUs."""
    peak_bytes: int
    """max(sampled peak of the tree's summed PSS, exact peak RSS of its largest process)."""
    tree_sampled_bytes: int
    largest_process_rss_bytes: int
    processes: int
    rc: int
    result: dict[str, Any] | None
    error: str | None = None


def measure(cmd: list[str], *, env: dict[str, str] | None = None) -> Measured:
    """Run ``cmd`` with stdout captured to a file (or discarded by the command itself) and measure it."""
    load_avg = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=ROOT)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        sampler.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    largest = usage.ru_maxrss * 1024  # Linux reports KiB
    result = next((json.loads(line[len(RESULT_MARK):]) for line in stdout.splitlines()
                   if line.startswith(RESULT_MARK)), None)
    error = None
    if proc.returncode != 0:
        error = (stderr.strip().splitlines() or ["(no message)"])[-1][:300]
    return Measured(wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime, load_avg=load_avg,
                    peak_bytes=max(sampler.peak_bytes, largest), tree_sampled_bytes=sampler.peak_bytes,
                    largest_process_rss_bytes=largest, processes=len(sampler.processes_seen), rc=proc.returncode,
                    result=result, error=error)


def best(runs: list[Measured]) -> Measured:
    """The shortest wall and CPU times of the runs (other work only ever adds to them), and the largest peak
    memory any run reached."""
    best = min(runs, key=lambda m: m.wall_s)
    best.cpu_s = min(m.cpu_s for m in runs)
    peak = max(runs, key=lambda m: m.peak_bytes)
    best.peak_bytes, best.tree_sampled_bytes = peak.peak_bytes, peak.tree_sampled_bytes
    best.largest_process_rss_bytes = peak.largest_process_rss_bytes
    return best


# --- cases -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    fmt: str
    """"gz" or "json": how the files on disk are stored."""
    files: int
    json_bytes: int
    """Uncompressed JSON, all files together."""


@dataclass
class CaseResult:
    case: Case
    runs: dict[str, Measured] = field(default_factory=dict)


def json_bytes(files: list[Path]) -> int:
    total = 0
    for f in files:
        if f.name.endswith(".gz"):
            with gzip.open(f, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    total += len(chunk)
        else:
            total += f.stat().st_size
    return total


def child_cmd(python: str, kind: str, path: Path) -> list[str]:
    return [python, str(CHILDREN_SCRIPT), kind, str(path)]


def cli_cmd(gpuscope: str, path: Path) -> list[str]:
    """``gpuscope analyze PATH --json --no-save > /dev/null``: the CLI end to end, as a user runs it."""
    return ["sh", "-c", 'exec "$0" analyze "$1" --json --no-save > /dev/null', gpuscope, str(path)]


def child_env(data_dir: Path) -> dict[str, str]:
    """The children's environment: a store of their own, and compiled bytecode as an installed package has it.

    Where PYTHONDONTWRITEBYTECODE is set (as on the development machine), every run would compile gpuscope's
    modules from source again (about 0.1 s a process); pip compiles them at install, so they are compiled here
    once, into a cache outside the repository."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(GPUSCOPE_HOME=str(data_dir / "home"), PYTHONPYCACHEPREFIX=str(data_dir / "pycache"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "gpuscope"), str(CHILDREN_SCRIPT)],
                   env=env, check=False, stdout=subprocess.DEVNULL)
    return env


# --- command line and figures ----------------------------------------------------------------------------------


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every analyze benchmark takes."""
    parser.add_argument("--gpuscope", default=str(ROOT / ".venv" / "bin" / "gpuscope"), help="the gpuscope CLI")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where generated traces go and are reused (default: a temporary directory, removed)")
    parser.add_argument("--large-mb", type=float, default=50.0, help="about this many MB of JSON per large rank")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each gpuscope/decode measurement (best is kept)")
    parser.add_argument("--json-out", type=Path, default=None, help="also write every measurement here as JSON")


def div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def figure(value: float | None, spec: str, unit: str = "") -> str:
    return "n/a" if value is None or math.isnan(value) else format(value, spec) + unit
