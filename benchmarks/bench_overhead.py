"""What attaching gpuscope costs a running job: a CPU-bound target's throughput with and without it.

One run of this script starts one CPU-bound Python target (tests/targets/spin.py: a main thread
spinning in pure Python, a helper thread napping; it reports loops done per 0.25 s window) and
measures its throughput in short spans, alternately

- alone, and
- with gpuscope attached at default settings: the sampling loop `gpuscope attach` runs (host
  samples of the process tree every 0.5 s, a py-spy dump every second, NVML and DCGM when present,
  a flush to the store every second), run from this process, which is not the target's,

in the order AB BA AB ..., so both conditions share the machine's state of the moment and a drift
in the machine's load cancels out. The figure is the median over pairs of attached / alone (target
>= 0.97, aim 0.99). The sampling loop's own CPU per tick (its thread plus the py-spy processes it
starts) is measured over the attached spans. ``--cli`` measures the attached spans with the real
``gpuscope attach PID --duration S`` process instead (start-up and report included in its CPU).

    .venv/bin/python benchmarks/bench_overhead.py [--pairs 12] [--seconds 2] [--busy N] [--workers N] [--cli] [--json]

``--workers N`` measures a torch training loop instead (tests/targets/train_loader.py: a small CPU
model fed by a DataLoader with N worker processes; it reports steps per window), so the sampler
follows a trainer and its loader workers, as it does for real jobs.

``--busy N`` adds N more spinning processes (not attached) to load the cores, e.g. as many as the
machine has, to see the overhead when gpuscope must take CPU from the job rather than an idle core.
On a machine that other work loads too, the spans' rates vary; more pairs narrow the median.
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
TRAIN = ROOT / "tests" / "targets" / "train_loader.py"
WARMUP_S = 2.0


@dataclass(frozen=True)
class Pair:
    alone_loops_per_s: float
    attached_loops_per_s: float
    ratio: float
    """attached / alone, loops per wall second: what the job sees."""
    cpu_ratio: float
    """attached / alone, loops per CPU second the target got: the slowdown not due to sharing cores."""


@dataclass(frozen=True)
class Result:
    cores: int
    busy_processes: int
    seconds: float
    mode: str
    pairs: tuple[Pair, ...]
    ratio_median: float
    ratio_overall: float
    cpu_ratio_median: float
    sampler_ticks: int
    sampler_cpu_s: float
    sampler_cpu_ms_per_tick: float
    sampler_cpu_share_of_a_core: float


class Target:
    """The spinning target (or, with ``workers``, the training loop); a reader thread collects its
    (start_ns, end_ns, loops, cpu_ns) windows."""

    def __init__(self, workers: int | None = None) -> None:
        command = ([str(SPIN)] if workers is None else
                   [str(TRAIN), "--workers", str(workers), "--seconds", "86400", "--windows"])
        self.proc = subprocess.Popen([sys.executable, *command], stdout=subprocess.PIPE, text=True)
        self.windows: list[tuple[int, int, int, int]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            _, start, end, loops, cpu = line.split()
            self.windows.append((int(start), int(end), int(loops), int(cpu)))

    def rate(self, start_ns: int, end_ns: int) -> tuple[float, float]:
        """(loops per wall second, loops per CPU second of the target) over the windows wholly inside
        [start_ns, end_ns]."""
        inside = [w for w in self.windows if w[0] >= start_ns and w[1] <= end_ns]
        if not inside:
            raise RuntimeError("no complete window of the target in the measured span; raise --seconds")
        loops = sum(w[2] for w in inside)
        return loops / (sum(w[1] - w[0] for w in inside) / 1e9), loops / (sum(w[3] for w in inside) / 1e9)

    def stop(self) -> None:
        import psutil

        for child in psutil.Process(self.proc.pid).children(recursive=True):
            child.kill()
        self.proc.kill()
        self.proc.wait()


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Attacher:
    """Attaches gpuscope to the target for one span at a time, counting its ticks and CPU."""

    def __init__(self, pid: int, home: Path, *, cli: bool) -> None:
        from gpuscope.store import Store

        self.pid, self.home, self.cli = pid, home, cli
        self.store = Store(home)
        self.ticks = 0
        self.cpu_s = 0.0
        self.sampling_s = 0.0

    def span(self, seconds: float) -> tuple[int, int]:
        """Attach for ``seconds``; return the span it sampled (start_ns, end_ns)."""
        cpu0, kids0 = time.process_time(), children_cpu_s()
        start, end, ticks = self._cli(seconds) if self.cli else self._in_process(seconds)
        self.cpu_s += (0.0 if self.cli else time.process_time() - cpu0) + children_cpu_s() - kids0
        self.ticks += ticks
        self.sampling_s += (end - start) / 1e9
        return start, end

    def _in_process(self, seconds: float) -> tuple[int, int, int]:
        from gpuscope.api.recording import DEFAULT_STACK_INTERVAL_S
        from gpuscope.collectors.host import HostSampler
        from gpuscope.collectors.sampler import DEFAULT_INTERVAL_S, SamplingLoop
        from gpuscope.collectors.stacks import StackSampler
        from gpuscope.model.run import RunMeta
        from gpuscope.store import new_run_id

        host = HostSampler(self.pid)
        stacks = StackSampler(host.stack_pids, roots=host.trainers, every_s=DEFAULT_STACK_INTERVAL_S,
                              on_dump=host.roles.note_stacks)
        start = time.time_ns()
        meta = self.store.create_run(RunMeta(id=new_run_id(), name="bench", kind="attach", status="running",
                                             started_ns=start, pid=self.pid))
        result = SamplingLoop(self.store, meta.id, [host], stacks=stacks, interval_s=DEFAULT_INTERVAL_S,
                              duration_s=seconds, on_tick=lambda tick: host.observe(tick.rows)).run()
        return start, time.time_ns(), result.ticks

    def _cli(self, seconds: float) -> tuple[int, int, int]:
        out = subprocess.run([sys.executable, "-m", "gpuscope", "attach", str(self.pid), "--duration", str(seconds),
                              "--json"], capture_output=True, text=True, check=True,
                             env={**os.environ, "GPUSCOPE_HOME": str(self.home)})
        run = json.loads(out.stdout)["run"]
        start = int(run["started_ns"])
        return start, start + int(run["duration_s"] * 1e9), int(seconds / 0.5) + 1


def alone_span(seconds: float) -> tuple[int, int]:
    start = time.time_ns()
    time.sleep(seconds)
    return start, time.time_ns()


def run(pairs: int, seconds: float, busy: int, *, cli: bool, workers: int | None = None) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        hogs = [subprocess.Popen([sys.executable, str(SPIN)], stdout=subprocess.DEVNULL) for _ in range(busy)]
        target = Target(workers)
        attacher = Attacher(target.proc.pid, Path(tmp), cli=cli)
        measured = []
        try:
            time.sleep(WARMUP_S if workers is None else WARMUP_S + 6.0)  # torch's import, the workers' start
            for i in range(pairs):
                order = ("alone", "attached") if i % 2 == 0 else ("attached", "alone")
                spans = {kind: attacher.span(seconds) if kind == "attached" else alone_span(seconds)
                         for kind in order}
                time.sleep(0.3)  # the target's window that closes the last span
                (alone, alone_cpu), (attached, attached_cpu) = target.rate(*spans["alone"]), target.rate(
                    *spans["attached"])
                measured.append(Pair(alone, attached, attached / alone, attached_cpu / alone_cpu))
        finally:
            attacher.store.close()
            target.stop()
            for hog in hogs:
                hog.kill()
                hog.wait()
    ratios = [p.ratio for p in measured]
    return Result(
        cores=len(os.sched_getaffinity(0)), busy_processes=busy, seconds=seconds,
        mode=("gpuscope attach (CLI)" if cli else "sampling loop (in process)")
        + ("" if workers is None else f", training loop with {workers} loader workers"), pairs=tuple(measured),
        ratio_median=statistics.median(ratios),
        ratio_overall=sum(p.attached_loops_per_s for p in measured) / sum(p.alone_loops_per_s for p in measured),
        cpu_ratio_median=statistics.median(p.cpu_ratio for p in measured),
        sampler_ticks=attacher.ticks, sampler_cpu_s=attacher.cpu_s,
        sampler_cpu_ms_per_tick=1000 * attacher.cpu_s / max(attacher.ticks, 1),
        sampler_cpu_share_of_a_core=attacher.cpu_s / max(attacher.sampling_s, 1e-9),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=12, help="alone / attached span pairs")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each span")
    parser.add_argument("--busy", type=int, default=0, help="extra spinning processes loading the cores")
    parser.add_argument("--cli", action="store_true", help="attach with the real `gpuscope attach` process")
    parser.add_argument("--workers", type=int, default=None,
                        help="measure a torch training loop with this many DataLoader workers instead")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = run(args.pairs, args.seconds, args.busy, cli=args.cli, workers=args.workers)
    if args.json:
        print(json.dumps(asdict(result), indent=2))
        return
    print(f"{result.cores} cores, {result.busy_processes} extra busy processes, {result.mode},"
          f" {result.seconds:g} s spans")
    print(f"{'pair':>4}  {'alone loops/s':>14}  {'attached loops/s':>17}  {'ratio':>6}  {'per CPU-s':>9}")
    for i, p in enumerate(result.pairs, 1):
        print(f"{i:>4}  {p.alone_loops_per_s:>14.1f}  {p.attached_loops_per_s:>17.1f}  {p.ratio:>6.3f}"
              f"  {p.cpu_ratio:>9.3f}")
    print(f"throughput attached / alone: median {result.ratio_median:.3f}, overall {result.ratio_overall:.3f}"
          " (target >= 0.97, aim 0.99)")
    print(f"per CPU-second the target got: median {result.cpu_ratio_median:.3f}"
          " (slowdown not due to sharing cores, e.g. py-spy reading the target's memory)")
    if result.mode.startswith("gpuscope attach"):
        print(f"gpuscope attach's CPU (interpreter start, imports, sampling, report): "
              f"{result.sampler_cpu_s / len(result.pairs):.2f} s per {result.seconds:g} s attach")
        return
    print(f"gpuscope's CPU: {result.sampler_cpu_ms_per_tick:.1f} ms per tick over {result.sampler_ticks} ticks"
          f" = {100 * result.sampler_cpu_share_of_a_core:.1f}% of one core while attached")


if __name__ == "__main__":
    main()
