"""The consistency check every report passes before it is shown: no claim contradicts another.

A user acts on the first thing a report tells them and stops trusting it after the first contradiction. The
rules are written not to contradict each other; this module checks that they did not, on the finished report, and
again on every report read back from the store or a file (a report saved by an older version is shown too). A
failed check is a bug in gpuscope: the weaker of the two claims is withdrawn, the report's warnings name the check
and what was withdrawn, ``Report.failed_checks`` records the check (a gate over the report fails closed), and
both claims are never printed.

Which claim is the weaker is decided by one rule: measurement outranks what is inferred from it, and inference
outranks advice. In order, strongest first:

1. what the run measured: the facts, the stage shares, each rank's figures, what the host and the GPUs reported;
2. the verdict, inferred from the stage shares;
3. figures derived from those: the cost's waste split by cause, a recommendation's modelled saving;
4. advice: which recommendations are given, and in which order.

The lower claim yields to the higher. A measured value that is impossible on its own (a share outside [0, 1],
stage shares adding past the step) has no stronger claim to yield to: it is flagged, nothing is withdrawn for it,
and a gate over the report fails.

Checks: no larger batch while any rank is at or above the memory headroom line; no "add DataLoader workers"
while the host's cores are saturated (unless the loader waits on reads, which needs no core); the verdict's
cause is the cost's largest waste cause; every share in [0, 1] and the stage shares add up to at most 1; no
saving larger than the stage share (the waste) it removes; recommendations in order of saving; no GPU verdict
for a run that saw no GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

from gpuscope.analyzers.advice.batch import BATCH_HEADROOM
from gpuscope.analyzers.diagnosis import codes
from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.analyzers.diagnosis.rules.data import CORES_SATURATED
from gpuscope.analyzers.diagnosis.stages import STALLS
from gpuscope.model.cost import WasteSplit
from gpuscope.model.diagnosis import Recommendation, Verdict
from gpuscope.model.report import Report

EPS = 1e-6
BUG = "Consistency check failed (a gpuscope bug; please report it with this report's JSON)"
Yields = Literal["recommendation", "verdict", "waste_split", "order"]
"""The claim a problem withdraws (or, for ``order``, puts right): advice, the verdict, the cost's split by cause."""
YIELD_WORDS: dict[Yields, str] = {
    "recommendation": "advice yields to measurement",
    "verdict": "the verdict yields to the measurement it contradicts",
    "waste_split": "a derived figure yields to the measured shares and the verdict",
    "order": "the order of advice yields to its savings",
}
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
    yields: Yields | None = None
    """The weaker claim that gives way; None for an impossible measured value (flagged only)."""


def problems(report: Report) -> tuple[Problem, ...]:
    """Every contradiction in ``report``; empty for a consistent report."""
    return tuple(p for check in CHECKS for p in check(report))


def enforce(report: Report) -> Report:
    """``report`` with the weaker claim of each contradiction withdrawn, one warning per problem naming its check,
    and the checks recorded in ``failed_checks``. Idempotent: a report enforced before (and saved) comes back
    unchanged, so it can run on every report read back."""
    found = problems(report)
    if not found:
        return report
    fixed = _withdrawn(report, found)
    notes = tuple(_warning(p) for p in found)
    return replace(fixed, warnings=report.warnings + tuple(n for n in dict.fromkeys(notes)
                                                           if n not in report.warnings),
                   failed_checks=tuple(dict.fromkeys(report.failed_checks + tuple(p.check for p in found))))


def _warning(p: Problem) -> str:
    what = {"recommendation": f"The recommendation '{p.withdraw}' is withdrawn",
            "verdict": "The verdict is withdrawn",
            "waste_split": "The cost's waste split by cause is withdrawn (the waste is left unattributed)",
            "order": "The recommendations are put in order of their saving"}
    done = f" {what[p.yields]} ({YIELD_WORDS[p.yields]})." if p.yields is not None else ""
    return f"{BUG}: check {p.check}: {p.text}{done}"


def _withdrawn(report: Report, found: tuple[Problem, ...]) -> Report:
    codes_out = {p.withdraw for p in found if p.yields == "recommendation" and p.withdraw is not None}
    recs = tuple(r for r in report.recommendations if r.code not in codes_out)
    if any(p.yields == "order" for p in found):
        recs = _by_saving(recs)
    findings = tuple(replace(f, recommendations=tuple(c for c in f.recommendations if c not in codes_out))
                     for f in report.findings)
    out = replace(report, recommendations=recs, findings=findings)
    checks = ", ".join(sorted({p.check for p in found if p.yields == "verdict"}))
    if checks:
        out = replace(out, verdict=Verdict(primary=None, resource="unknown", confidence=0.0,
                                           summary=f"No verdict: the one found contradicted what the run measured "
                                                   f"(consistency check {checks})."))
    if any(p.yields == "waste_split" for p in found) and out.cost is not None:
        out = replace(out, cost=replace(out.cost, waste_by_cause_usd=WasteSplit(unattributed=out.cost.wasted_usd)))
    return out


def _by_saving(recs: tuple[Recommendation, ...]) -> tuple[Recommendation, ...]:
    """The recommendations with a saving put in order of it, in the places they held; the others stay put."""
    with_saving = sorted((r for r in recs if r.est_step_saving is not None),
                         key=lambda r: -(r.est_step_saving or 0.0))
    ranked = iter(with_saving)
    return tuple(next(ranked) if r.est_step_saving is not None else r for r in recs)


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
                          f"above the {BATCH_HEADROOM:.1%} headroom line).", withdraw=r.code,
                          yields="recommendation")


def _workers_vs_cores(report: Report) -> Iterator[Problem]:
    host = report.live.host if report.live is not None else None
    if host is None or host.host_cpu_mean is None or host.host_cpu_mean < CORES_SATURATED:
        return
    if report.verdict.primary == "data_loading" and report.verdict.resource == "io":
        return  # a loader waiting on reads needs no core to wait: more workers overlap its reads
    for r in report.recommendations:
        if r.code in WORKER_CODES:
            yield Problem("workers_vs_cores", f"'{r.title}' while the host's cores are {host.host_cpu_mean:.0%} "
                          "busy: more workers have no core to run on.", withdraw=r.code, yields="recommendation")


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
        yield Problem("largest_cause", f"the verdict names {primary} but the cost's largest waste is {largest}.",
                      yields="waste_split" if _largest_stall(report) == primary else "verdict")


def _largest_stall(report: Report) -> str | None:
    """The stall stage with the largest measured share (what the verdict and the waste split both follow)."""
    known = {st: v for st in STALLS if (v := report.stage_shares.get(st)) is not None}
    return max(known, key=lambda st: known[st]) if known else None


def _bounds(report: Report) -> Iterator[Problem]:
    named: list[tuple[str, float | None]] = [(f"stage share {k}", v) for k, v in report.stage_shares.items()]
    facts = facts_of(report)
    named += [("GPU busy", facts.gpu_busy), ("data wait share", facts.data_wait_share),
              ("exposed communication share", facts.exposed_comm_share)]
    named += [(f"rank {r.rank} GPU busy", r.gpu_busy) for r in report.ranks]
    named += [(f"finding {f.code} share", f.time_share) for f in report.findings]
    named += [("verdict confidence", report.verdict.confidence)]
    for what, v in named:
        if v is not None and not (-EPS <= v <= 1 + EPS):
            yield Problem("bounds", f"{what} is {v:.4g}, outside [0, 1].")
    for r in report.recommendations:
        v = r.est_step_saving
        if v is not None and not (-EPS <= v <= 1 + EPS):
            yield Problem("bounds", f"saving of {r.code} is {v:.4g}, outside [0, 1].", withdraw=r.code,
                          yields="recommendation")
    total = sum(v for v in report.stage_shares.values() if v is not None)
    if total > 1 + EPS:
        yield Problem("bounds", f"the stage shares add up to {total:.4f}, more than the whole step.")


def _savings_vs_waste(report: Report) -> Iterator[Problem]:
    shares = report.stage_shares
    for r in report.recommendations:
        share = shares.get(r.stage) if r.stage is not None else None
        if r.est_step_saving is not None and share is not None and r.est_step_saving > share + EPS:
            yield Problem("savings_vs_waste", f"'{r.title}' would save {r.est_step_saving:.1%} of the step, more "
                          f"than the {share:.1%} its stage ({r.stage}) takes.", withdraw=r.code,
                          yields="recommendation")


def _order(report: Report) -> Iterator[Problem]:
    steps = [r.est_step_saving for r in report.recommendations if r.est_step_saving is not None]
    if any(a < b - EPS for a, b in zip(steps, steps[1:])):
        yield Problem("order", "recommendations are not in order of their saving.", yields="order")


def _no_gpu(report: Report) -> Iterator[Problem]:
    live = report.live
    saw_gpu = bool(report.run.gpus) or any(r.gpu_busy is not None for r in report.ranks) or (
        live is not None and bool(live.gpus))
    if live is None or saw_gpu:
        return
    v = report.verdict
    if v.resource == "gpu" or v.primary in ("idle", "gpu_compute", "memory"):
        yield Problem("no_gpu", f"a run that saw no GPU got the GPU verdict {v.primary} ({v.resource}).",
                      yields="verdict")


CHECKS: tuple[Callable[[Report], Iterator[Problem]], ...] = (
    _batch_vs_memory, _workers_vs_cores, _largest_cause, _bounds, _savings_vs_waste, _order, _no_gpu)
"""Every check, in the order its problems are reported."""
