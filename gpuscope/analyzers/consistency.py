"""The consistency check every report passes before it is shown: no claim contradicts another.

A user acts on the first thing a report tells them and stops trusting it after the first contradiction. The
rules are written not to contradict each other; this module checks that they did not, on the finished
report. A failed check is a bug in gpuscope: the contradicted recommendation is withdrawn and the report
says so in a warning, instead of printing both claims.

Checks: no larger batch while any rank is at or above the memory headroom line; no "add DataLoader workers"
while the host's cores are saturated (unless the loader waits on reads, which needs no core); the verdict's
cause is the cost's largest waste cause; every share in [0, 1] and the stage shares add up to at most 1; no
saving larger than the stage share (the waste) it removes; recommendations in order of saving; no GPU verdict
for a run that saw no GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from gpuscope.analyzers.advice.batch import BATCH_HEADROOM
from gpuscope.analyzers.diagnosis import codes
from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.analyzers.diagnosis.rules.data import CORES_SATURATED
from gpuscope.analyzers.diagnosis.stages import STALLS
from gpuscope.model.report import Report

EPS = 1e-6
BUG = "Consistency check failed (a gpuscope bug; please report it with this report's JSON)"
BATCH_CODES = frozenset({codes.LARGER_BATCH, codes.DYNAMIC_BATCHING})
WORKER_CODES = frozenset({codes.DATALOADER_NUM_WORKERS, codes.DATALOADER_PREFETCH})


@dataclass(frozen=True)
class Problem:
    """One contradiction found in a report."""

    check: str
    """Which check found it, e.g. "batch_vs_memory"."""
    text: str
    withdraw: str | None = None
    """The recommendation code withdrawn to resolve it, if any."""


def problems(report: Report) -> tuple[Problem, ...]:
    """Every contradiction in ``report``; empty for a consistent report."""
    return tuple(p for check in CHECKS for p in check(report))


def enforce(report: Report) -> Report:
    """``report`` with contradicted recommendations withdrawn and one warning per problem found."""
    found = problems(report)
    if not found:
        return report
    withdrawn = {p.withdraw for p in found if p.withdraw is not None}
    recs = tuple(r for r in report.recommendations if r.code not in withdrawn)
    findings = tuple(replace(f, recommendations=tuple(c for c in f.recommendations if c not in withdrawn))
                     for f in report.findings)
    notes = tuple(f"{BUG}: {p.text}" + (f" The recommendation '{p.withdraw}' is withdrawn." if p.withdraw else "")
                  for p in found)
    return replace(report, recommendations=recs, findings=findings, warnings=report.warnings + notes)


def _batch_vs_memory(report: Report) -> Iterator[Problem]:
    facts = facts_of(report)
    full = facts.peak_memory_share is not None and facts.peak_memory_share >= BATCH_HEADROOM
    near = any(f.code == codes.MEMORY_NEAR_CAPACITY for f in report.findings)
    if not (full or near):
        return
    share = facts.peak_memory_share or 0.0
    for r in report.recommendations:
        if r.code in BATCH_CODES:
            yield Problem("batch_vs_memory", f"'{r.title}' while peak memory is {share:.0%} of the device (at or "
                          f"above the {BATCH_HEADROOM:.0%} headroom line).", withdraw=r.code)


def _workers_vs_cores(report: Report) -> Iterator[Problem]:
    host = report.live.host if report.live is not None else None
    if host is None or host.host_cpu_mean is None or host.host_cpu_mean < CORES_SATURATED:
        return
    if report.verdict.primary == "data_loading" and report.verdict.resource == "io":
        return  # a loader waiting on reads needs no core to wait: more workers overlap its reads
    for r in report.recommendations:
        if r.code in WORKER_CODES:
            yield Problem("workers_vs_cores", f"'{r.title}' while the host's cores are {host.host_cpu_mean:.0%} "
                          "busy: more workers have no core to run on.", withdraw=r.code)


def _largest_cause(report: Report) -> Iterator[Problem]:
    primary, cost = report.verdict.primary, report.cost
    if primary not in STALLS or cost is None or cost.wasted_usd is None:
        return
    w = cost.waste_by_cause_usd
    by_cause = {st: getattr(w, st) for st in STALLS if getattr(w, st) is not None}
    if not by_cause:
        return
    top = max(by_cause.values())
    if (by_cause.get(primary) or 0.0) < top * (1 - EPS) - EPS:
        largest = max(by_cause, key=lambda st: by_cause[st])
        yield Problem("largest_cause", f"the verdict names {primary} but the cost's largest waste is {largest}.")


def _bounds(report: Report) -> Iterator[Problem]:
    named: list[tuple[str, float | None]] = [(f"stage share {k}", v) for k, v in report.stage_shares.items()]
    facts = facts_of(report)
    named += [("GPU busy", facts.gpu_busy), ("data wait share", facts.data_wait_share),
              ("exposed communication share", facts.exposed_comm_share)]
    named += [(f"rank {r.rank} GPU busy", r.gpu_busy) for r in report.ranks]
    named += [(f"finding {f.code} share", f.time_share) for f in report.findings]
    named += [(f"saving of {r.code}", r.est_step_saving) for r in report.recommendations]
    named += [("verdict confidence", report.verdict.confidence)]
    for what, v in named:
        if v is not None and not (-EPS <= v <= 1 + EPS):
            yield Problem("bounds", f"{what} is {v:.4g}, outside [0, 1].")
    total = sum(v for v in report.stage_shares.values() if v is not None)
    if total > 1 + EPS:
        yield Problem("bounds", f"the stage shares add up to {total:.4f}, more than the whole step.")


def _savings_vs_waste(report: Report) -> Iterator[Problem]:
    shares = report.stage_shares
    for r in report.recommendations:
        share = shares.get(r.stage) if r.stage is not None else None
        if r.est_step_saving is not None and share is not None and r.est_step_saving > share + EPS:
            yield Problem("savings_vs_waste", f"'{r.title}' would save {r.est_step_saving:.1%} of the step, more "
                          f"than the {share:.1%} its stage ({r.stage}) takes.", withdraw=r.code)


def _order(report: Report) -> Iterator[Problem]:
    steps = [r.est_step_saving for r in report.recommendations if r.est_step_saving is not None]
    if any(a < b - EPS for a, b in zip(steps, steps[1:])):
        yield Problem("order", "recommendations are not in order of their saving.")


def _no_gpu(report: Report) -> Iterator[Problem]:
    live = report.live
    saw_gpu = bool(report.run.gpus) or any(r.gpu_busy is not None for r in report.ranks) or (
        live is not None and bool(live.gpus))
    if live is None or saw_gpu:
        return
    v = report.verdict
    if v.resource == "gpu" or v.primary in ("idle", "gpu_compute", "memory"):
        yield Problem("no_gpu", f"a run that saw no GPU got the GPU verdict {v.primary} ({v.resource}).")


CHECKS: tuple[Callable[[Report], Iterator[Problem]], ...] = (
    _batch_vs_memory, _workers_vs_cores, _largest_cause, _bounds, _savings_vs_waste, _order, _no_gpu)
"""Every check, in the order its problems are reported."""
