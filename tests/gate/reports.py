"""Reports built in code for the gate's tests: per-step samples and the few whole-run figures it reads."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuscope.api.analysis import analyze_path
from gpuscope.model.cost import CostReport
from gpuscope.model.diagnosis import Recommendation, Stage, Verdict
from gpuscope.model.rank import Communication, Memory, RankReport, StepBreakdown, StepRecord
from gpuscope.model.report import Report, RunSummary


def step(i: int, duration_us: float, *, busy: float | None = 0.8, loader_share: float = 0.0,
         comm_share: float = 0.0, warmup: bool = False) -> StepRecord:
    loader, comm = duration_us * loader_share, duration_us * comm_share
    breakdown = StepBreakdown(kernel=duration_us - loader - comm, dataloader=loader, communication=comm)
    return StepRecord(name=str(i), start_us=float(i) * 1e6, duration_us=duration_us, breakdown_us=breakdown,
                      gpu_busy=busy, warmup=warmup)


def rank(steps: Sequence[StepRecord], *, number: int = 0, peak_bytes: int | None = 8 * 2**30) -> RankReport:
    durations = [s.duration_us for s in steps]
    steady = [s for s in steps if not s.warmup]
    # The steady window is the steady steps end to end: its busy share weighs each step by its length.
    known = all(s.gpu_busy is not None for s in steady) and sum(s.duration_us for s in steady) > 0
    busy = (sum((s.gpu_busy or 0.0) * s.duration_us for s in steady) / sum(s.duration_us for s in steady)
            if steady and known else None)
    return RankReport(rank=number, window_us=sum(durations), steps=len(steps),
                      step_time_us=sum(durations) / max(len(steps), 1), gpu_busy=busy,
                      step_breakdown_us=StepBreakdown(), temporal=None, idle_breakdown_us=None,
                      communication=Communication(total_us=0.0, exposed_us=0.0, overlap=None),
                      memory=Memory(peak_allocated_bytes=peak_bytes, device_bytes=80 * 2**30),
                      per_step=tuple(steps))


def report(durations_us: Sequence[float], *, name: str = "run", busy: Sequence[float | None] | None = None,
           loader_share: float | Sequence[float] = 0.0, primary: Stage | None = "gpu_compute",
           shares: dict[Stage, float | None] | None = None, usd_per_gpu_hour: float | None = 2.0,
           peak_bytes: int | None = 8 * 2**30, warmup: int = 0,
           recommendations: tuple[Recommendation, ...] = (), ranks: int = 1) -> Report:
    """One job: ``ranks`` identical ranks with these step times (the first ``warmup`` marked warm-up), priced at
    ``usd_per_gpu_hour`` (None: no price). ``loader_share``: the DataLoader's share of every step, or of each."""
    busy = busy if busy is not None else [0.8] * len(durations_us)
    loaders = [loader_share] * len(durations_us) if isinstance(loader_share, float | int) else list(loader_share)
    steps = [step(i, d, busy=b, loader_share=share, warmup=i < warmup)
             for i, (d, b, share) in enumerate(zip(durations_us, busy, loaders))]
    mean_loader = sum(loaders) / len(loaders) if loaders else 0.0
    return Report(run=RunSummary(id=f"id-{name}", kind="trace", name=name),
                  ranks=tuple(rank(steps, number=r, peak_bytes=peak_bytes) for r in range(ranks)),
                  verdict=Verdict(primary=primary, resource="gpu"),
                  recommendations=recommendations,
                  cost=CostReport(gpu_hours=1.0, usd_per_gpu_hour=usd_per_gpu_hour, price_source="test",
                                  total_usd=None, wasted_usd=None, gpu_count=ranks),
                  stage_shares=shares if shares is not None else {"gpu_compute": 1.0 - mean_loader,
                                                                  "data_loading": mean_loader, "communication": 0.0})


def analysed(path: Path) -> Report:
    """A real trace path analysed the way `gpuscope analyze` does it (rank files that cannot be read named)."""
    report, _ = analyze_path(path, name=path.name)
    return report
