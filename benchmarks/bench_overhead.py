"""What attaching gpuscope costs a running job: a CPU-bound target's throughput with and without it.

One run of this script starts one CPU-bound Python target (tests/targets/spin.py: a main thread
spinning in pure Python, a helper thread napping) and, round after round, measures its throughput

- alone, for ``--seconds``, then
- with ``gpuscope attach PID --duration SECONDS`` at default settings (the real CLI: host samples,
  py-spy stacks, NVML and DCGM when present), counting only the target's windows that fall inside
  the attach's sampling span,

so both conditions share the machine's state of the moment; alternating rounds cancel drifts in
the machine's load. The result is attached / alone (target >= 0.97, aim 0.99). A second part runs
the sampling loop in this process at the same settings and reports the sampler's own CPU per tick
(its thread plus the py-spy processes it starts), and the whole `gpuscope attach` process's CPU
(interpreter start, imports and the report included).

    .venv/bin/python benchmarks/bench_overhead.py [--rounds 3] [--seconds 6] [--busy N] [--json]

``--busy N`` adds N more spinning processes (not attached) to load the cores, e.g. as many as the
machine has, to see the overhead when gpuscope must take CPU from the job rather than an idle core.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPIN = ROOT / "tests" / "targets" / "spin.py"
WARMUP_S = 2.0


@dataclass(frozen=True)
class Round:
    alone_loops_per_s: float
    attached_loops_per_s: float
    ratio: float
    attach_cpu_s: float
    """CPU of the whole `gpuscope attach` process tree (start-up, sampling, report)."""


@dataclass(frozen=True)
class Result:
    cores: int
    busy_processes: int
    seconds: float
    rounds: tuple[Round, ...]
    ratio_median: float
    ratio_overall: float
    sampler_ticks: int
    sampler_cpu_ms_per_tick: float
    sampler_cpu_share_of_a_core: float


class Target:
    """The spinning target; a reader thread collects its (start_ns, end_ns, loops) windows."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(SPIN)], stdout=subprocess.PIPE, text=True)
        self.windows: list[tuple[int, int, int]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            _, start, end, loops = line.split()
            self.windows.append((int(start), int(end), int(loops)))

    def rate(self, start_ns: int, end_ns: int) -> float:
        """Loops per second over the windows wholly inside [start_ns, end_ns]."""
        inside = [(s, e, n) for s, e, n in self.windows if s >= start_ns and e <= end_ns]
        if not inside:
            raise RuntimeError("no complete window of the target in the measured span; raise --seconds")
        return sum(n for _, _, n in inside) / (sum(e - s for s, e, _ in inside) / 1e9)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def attached_round(target: Target, seconds: float, home: Path) -> tuple[float, float]:
    """(the target's rate during the attach's sampling span, CPU of the attach process tree)."""
    cpu0 = children_cpu_s()
    out = subprocess.run([sys.executable, "-m", "gpuscope", "attach", str(target.proc.pid), "--duration",
                          str(seconds), "--json"], capture_output=True, text=True, check=True,
                         env={**os.environ, "GPUSCOPE_HOME": str(home)})
    cpu = children_cpu_s() - cpu0
    run = json.loads(out.stdout)["run"]
    start = int(run["started_ns"])
    return target.rate(start, start + int(run["duration_s"] * 1e9)), cpu


def alone_round(target: Target, seconds: float) -> float:
    start = time.time_ns()
    time.sleep(seconds + 0.3)  # one window more, as the attached span's edges cost one too
    return target.rate(start, time.time_ns())


def sampler_cpu(pid: int, seconds: float, home: Path) -> tuple[int, float]:
    """(ticks, CPU seconds) of the sampling loop at default settings, run in this process."""
    from gpuscope.cli.attach import DEFAULT_STACK_INTERVAL_S
    from gpuscope.collectors.host import HostSampler
    from gpuscope.collectors.sampler import DEFAULT_INTERVAL_S, SamplingLoop
    from gpuscope.collectors.stacks import StackSampler
    from gpuscope.model.run import RunMeta
    from gpuscope.store import Store, new_run_id

    host = HostSampler(pid)
    stacks = StackSampler(host.pids, root=pid, every_s=DEFAULT_STACK_INTERVAL_S)
    with Store(home) as store:
        meta = store.create_run(RunMeta(id=new_run_id(), name="bench", kind="attach", status="running",
                                        started_ns=time.time_ns(), pid=pid))
        cpu0, kids0 = time.process_time(), children_cpu_s()
        result = SamplingLoop(store, meta.id, [host], stacks=stacks, interval_s=DEFAULT_INTERVAL_S,
                              duration_s=seconds).run()
        cpu = time.process_time() - cpu0 + children_cpu_s() - kids0
    return result.ticks, cpu


def run(rounds: int, seconds: float, busy: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        hogs = [subprocess.Popen([sys.executable, str(SPIN)], stdout=subprocess.DEVNULL) for _ in range(busy)]
        target = Target()
        try:
            time.sleep(WARMUP_S)
            measured = []
            for _ in range(rounds):
                alone = alone_round(target, seconds)
                attached, attach_cpu = attached_round(target, seconds, home)
                measured.append(Round(alone, attached, attached / alone, attach_cpu))
            ticks, cpu = sampler_cpu(target.proc.pid, seconds, home)
        finally:
            target.stop()
            for hog in hogs:
                hog.kill()
                hog.wait()
    ratios = [r.ratio for r in measured]
    return Result(
        cores=len(os.sched_getaffinity(0)), busy_processes=busy, seconds=seconds, rounds=tuple(measured),
        ratio_median=statistics.median(ratios),
        ratio_overall=sum(r.attached_loops_per_s for r in measured) / sum(r.alone_loops_per_s for r in measured),
        sampler_ticks=ticks, sampler_cpu_ms_per_tick=1000 * cpu / max(ticks, 1),
        sampler_cpu_share_of_a_core=cpu / seconds,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each alone / attached span")
    parser.add_argument("--busy", type=int, default=0, help="extra spinning processes loading the cores")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = run(args.rounds, args.seconds, args.busy)
    if args.json:
        print(json.dumps(asdict(result), indent=2))
        return
    print(f"{result.cores} cores, {result.busy_processes} extra busy processes, {result.seconds:g} s per span")
    print(f"{'round':>5}  {'alone loops/s':>14}  {'attached loops/s':>17}  {'ratio':>6}  {'attach CPU s':>12}")
    for i, r in enumerate(result.rounds, 1):
        print(f"{i:>5}  {r.alone_loops_per_s:>14.1f}  {r.attached_loops_per_s:>17.1f}  {r.ratio:>6.3f}"
              f"  {r.attach_cpu_s:>12.2f}")
    print(f"throughput ratio attached/alone: median {result.ratio_median:.3f}, overall {result.ratio_overall:.3f}"
          " (target >= 0.97, aim 0.99)")
    print(f"sampler at default settings: {result.sampler_cpu_ms_per_tick:.1f} ms CPU per tick over"
          f" {result.sampler_ticks} ticks = {100 * result.sampler_cpu_share_of_a_core:.1f}% of one core")


if __name__ == "__main__":
    main()
