"""How often does `gpuscope gate` fail a candidate that is the same job as its baseline? And catch a slowdown?

Real steady step records (warm-up excluded) from traces in sample_traces/ are resampled into a baseline and a
candidate of the same job, many times, and gated with the default settings:

- halves: two disjoint random draws of k steps from one recording (without replacement; k = N/2 is a random split
  of the job into halves): the step-to-step noise the significance test is there for;
- bootstrap: two draws of k steps with replacement from one recording's steps (used for the 6-step GPU samples,
  so GPU busy, data-loading share and cost per step are exercised too);
- windows: two adjacent runs of k consecutive steps at a random offset: noise plus whatever drifts inside a run;
- power: a halves draw whose candidate steps are all 20% longer (step time and cost with it): how often it is caught.

    .venv/bin/python benchmarks/gate_false_alarms.py [--draws 2000] [--seed 0] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from gpuscope.analyzers.diagnosis.facts import job_facts  # noqa: E402
from gpuscope.api.analysis import analyze_path  # noqa: E402
from gpuscope.gate.compare import compare  # noqa: E402
from gpuscope.gate.config import GateConfig  # noqa: E402
from gpuscope.model.rank import StepRecord  # noqa: E402
from gpuscope.model.report import Report  # noqa: E402

SAMPLES = ROOT / "sample_traces"
LONG = ("cpu_mlp_aa/run_a", "cpu_mlp_aa/run_b")
SHORT = ("resnet50_workers4", "resnet50_dataloader_bound", "resnet50_old_schema")
SLOWDOWN = 1.20


@dataclass(frozen=True)
class Case:
    trace: str
    scheme: str
    steps: int
    """k: steady steps in each of baseline and candidate."""
    draws: int
    failed: int
    weak: int
    """Draws where some metric was past its threshold but too few steps to test."""

    @property
    def rate(self) -> float:
        return self.failed / self.draws

    @property
    def interval(self) -> tuple[float, float]:
        """Wilson 95% interval of the rate: draws from one recording's steps are a sample too."""
        z, n, p = 1.96, self.draws, self.rate
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, centre - half), min(1.0, centre + half)


def analysed(name: str) -> Report:
    report, _ = analyze_path(SAMPLES / name, name=name)
    return report


def with_steps(report: Report, steps: Sequence[StepRecord], *, factor: float = 1.0) -> Report:
    """The report of one rank with these steps (renamed so repeated draws stay distinct steps), its GPU busy,
    data-loading share and facts (step time, ...) those of a window made of them; the other stage shares scaled to
    the rest of the step, so the shares still add up to at most the step (the report stays consistent)."""
    rank = report.ranks[0]
    picked = tuple(replace(s, name=str(i), duration_us=s.duration_us * factor) for i, s in enumerate(steps))
    total_us = sum(s.duration_us for s in picked)
    busy = (sum(s.gpu_busy * s.duration_us for s in picked if s.gpu_busy is not None) / total_us
            if rank.gpu_busy is not None and all(s.gpu_busy is not None for s in picked) and total_us > 0 else None)
    shares = dict(report.stage_shares)
    old = shares.get("data_loading")
    if old is not None and total_us > 0:
        new = sum(s.breakdown_us.dataloader for s in picked) / total_us
        rest = (1.0 - new) / (1.0 - old) if old < 1.0 else 0.0
        shares = {st: (v if v is None else new if st == "data_loading" else v * rest) for st, v in shares.items()}
    mean_us = total_us / len(picked) if picked else None
    ranks = (replace(rank, per_step=picked, gpu_busy=busy, step_time_us=mean_us),)
    # Advice is left out: its savings were worked out from the whole recording's shares, and a draw whose shares
    # fell below them would be (rightly) an inconsistent report, which the gate fails closed.
    return replace(report, ranks=ranks, stage_shares=shares, facts=job_facts(ranks, report.live, shares),
                   recommendations=())


Drawer = Callable[[np.random.Generator, list[StepRecord], int], tuple[list[StepRecord], list[StepRecord]]]


def halves(rng: np.random.Generator, steps: list[StepRecord], k: int) -> tuple[list[StepRecord], list[StepRecord]]:
    order = rng.permutation(len(steps))
    return [steps[i] for i in order[:k]], [steps[i] for i in order[k:2 * k]]


def bootstrap(rng: np.random.Generator, steps: list[StepRecord], k: int) -> tuple[list[StepRecord], list[StepRecord]]:
    return [steps[i] for i in rng.integers(0, len(steps), k)], [steps[i] for i in rng.integers(0, len(steps), k)]


def windows(rng: np.random.Generator, steps: list[StepRecord], k: int) -> tuple[list[StepRecord], list[StepRecord]]:
    start = int(rng.integers(0, len(steps) - 2 * k + 1))
    return steps[start:start + k], steps[start + k:start + 2 * k]


def run_case(report: Report, name: str, scheme: str, draw: Drawer, k: int, draws: int, seed: int,
             config: GateConfig, factor: float = 1.0) -> Case:
    rng = np.random.default_rng(seed)
    steady = [s for s in report.ranks[0].per_step if not s.warmup]
    failed = weak = 0
    for _ in range(draws):
        base_steps, cand_steps = draw(rng, steady, k)
        result = compare(with_steps(report, base_steps), with_steps(report, cand_steps, factor=factor), config)
        failed += not result.passed
        weak += any(m.status == "weak" for m in result.metrics)
    return Case(trace=name, scheme=scheme, steps=k, draws=draws, failed=failed, weak=weak)


def measure(draws: int, seed: int, config: GateConfig | None = None) -> list[Case]:
    config = config or GateConfig()
    cases: list[Case] = []
    for name in LONG:
        report = analysed(name)
        n = sum(not s.warmup for s in report.ranks[0].per_step)
        for k in (5, 10, 20, n // 2):
            cases.append(run_case(report, name, "halves", halves, k, draws, seed, config))
        for k in (5, 10, 20):
            cases.append(run_case(report, name, "windows", windows, k, draws, seed, config))
        for k in (5, 10, 20):
            cases.append(run_case(report, name, f"power +{SLOWDOWN - 1:.0%}", halves, k, draws, seed, config,
                                  factor=SLOWDOWN))
    for name in SHORT:
        report = analysed(name)
        for k in (5, 6, 10):
            cases.append(run_case(report, name, "bootstrap", bootstrap, k, draws, seed, config))
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="Print the cases as JSON.")
    args = parser.parse_args()
    cases = measure(args.draws, args.seed)
    if args.json:
        print(json.dumps([{**c.__dict__, "rate": c.rate, "interval_95": c.interval} for c in cases], indent=2))
        return 0
    table = Table(box=None, header_style="bold")
    for col in ("trace", "scheme", "k steps each", "draws", "gate failed", "rate", "95% interval", "weak draws"):
        table.add_column(col, justify="left" if col in ("trace", "scheme") else "right")
    for c in cases:
        low, high = c.interval
        table.add_row(c.trace, c.scheme, str(c.steps), str(c.draws), str(c.failed), f"{c.rate:.2%}",
                      f"{low:.2%}-{high:.2%}", str(c.weak))
    Console(width=120).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
