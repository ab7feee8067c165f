"""Can two runs be gated against each other? One function decides, with a named reason for each difference.

A gate compares one job before and after a change. A run of another job (another GPU model or count, inference
against training), a run that lost ranks (a rank file that cannot be read, fewer ranks than its world size or than
the other run), a run without steady steps, or a report of a schema this version does not read cannot be compared
metric by metric: its numbers would read as a change of the job (one GPU fewer costs less, a CPU run is faster per
dollar) when they are another job, or nothing. So the gate fails closed on each of these, and on a report that
failed its consistency check (``gpuscope.analyzers.consistency``): one of its claims contradicted another, a
gpuscope bug, and what it says cannot be gated on.

A missing rank is the one difference a user may accept (``--allow-partial``): the gate then compares the ranks
both runs have. Everything else describes another job, and no flag turns it into this one.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from gpuscope.analyzers import consistency
from gpuscope.gate.result import Mismatch, Which
from gpuscope.gate.samples import job_steps
from gpuscope.model.rank import RankReport
from gpuscope.model.report import SCHEMA, Report

SHOWN_FILES = 3
SHOWN_SCHEMA_CHARS = 40


@dataclass(frozen=True)
class Comparability:
    """What ``comparability`` found: every mismatch, and the ranks both runs read."""

    mismatches: tuple[Mismatch, ...]
    common_ranks: tuple[int, ...]

    def blocking(self, *, allow_partial: bool) -> tuple[Mismatch, ...]:
        """The mismatches that keep the runs from being compared, given whether a partial comparison is allowed."""
        return tuple(m for m in self.mismatches if not (allow_partial and m.partial))


def comparability(baseline: Report, candidate: Report) -> Comparability:
    """Every reason the two runs cannot be compared as runs of one job; none when they can."""
    common = tuple(sorted({r.rank for r in baseline.ranks} & {r.rank for r in candidate.ranks}))
    schema = [m for m in (_schema("baseline", baseline), _schema("candidate", candidate)) if m is not None]
    if schema:  # the other fields of a report in an unknown schema mean what that schema says: nothing to read
        return Comparability(tuple(schema), common)
    checked = [_inconsistent("baseline", baseline), _inconsistent("candidate", candidate)]
    if not baseline.ranks or not candidate.ranks:  # no trace (a live run): nothing else to compare it by
        traceless = [*checked, no_steady_steps("baseline", baseline), no_steady_steps("candidate", candidate)]
        return Comparability(tuple(m for m in traceless if m is not None), common)
    found = [_lost_ranks("baseline", baseline), _lost_ranks("candidate", candidate)]
    found += [_gpu_count(baseline, candidate), _gpu_model(baseline, candidate), _workload(baseline, candidate)]
    if not any(m is not None for m in found[:3]):
        found.append(_ranks_differ(baseline, candidate))
    found += [no_steady_steps("baseline", baseline), no_steady_steps("candidate", candidate), *checked]
    return Comparability(tuple(m for m in found if m is not None), common)


def _schema(side: Which, report: Report) -> Mismatch | None:
    if report.schema == SCHEMA:
        return None
    shown = report.schema if len(report.schema) <= SHOWN_SCHEMA_CHARS else report.schema[:SHOWN_SCHEMA_CHARS] + "..."
    return Mismatch("report_schema", side, f"the {side}'s report is in schema {shown!r}, which this gpuscope does "
                    f"not read (it reads {SCHEMA}): analyse its traces again with this version", partial=False)


def _inconsistent(side: Which, report: Report) -> Mismatch | None:
    """A report that failed a consistency check, when it was made or now (a report saved by an older version)."""
    checks = tuple(dict.fromkeys(report.failed_checks + tuple(p.check for p in consistency.problems(report))))
    if not checks:
        return None
    return Mismatch("inconsistent_report", side, f"the {side}'s report failed its consistency check "
                    f"({', '.join(checks)}): two of its claims contradicted each other (a gpuscope bug; its warnings "
                    "say which), so its numbers are not gated on", partial=False)


def world_size(report: Report) -> int | None:
    """The job's world size as its ranks' traces state it (the largest, should they disagree)."""
    return max((r.world_size for r in report.ranks if r.world_size is not None), default=None)


def _lost_ranks(side: Which, report: Report) -> Mismatch | None:
    """A rank file that could not be read, or fewer ranks read than the world size the traces state."""
    world, read = world_size(report), {r.rank for r in report.ranks}
    missing = sorted(set(range(world)) - read) if world is not None else []
    of_world = f": {len(read)} of its {world} ranks read" if world is not None else ""
    if report.unread_rank_files:
        files = "; ".join(report.unread_rank_files[:SHOWN_FILES])
        more = len(report.unread_rank_files) - SHOWN_FILES
        files += f"; and {more} more" if more > 0 else ""
        count = len(report.unread_rank_files)
        return Mismatch("unreadable_rank", side, f"{count} rank file{'s' if count > 1 else ''} of the {side} cannot "
                        f"be read ({files}){of_world}", partial=True)
    if missing:
        return Mismatch("missing_ranks", side, f"the {side} lacks {_ranks_text(missing)}{of_world} (its world "
                        "size)", partial=True)
    return None


def _gpu_count(baseline: Report, candidate: Report) -> Mismatch | None:
    """Another number of ranks in the job, by the world sizes both state, or a rank driving another number of GPUs."""
    world_b, world_c = world_size(baseline), world_size(candidate)
    if world_b is not None and world_c is not None and world_b != world_c:
        return Mismatch("gpu_count", "both", f"the baseline is a job of {world_b} ranks and the candidate of "
                        f"{world_c} (their world sizes): another GPU count", partial=False)
    gpus_c = {r.rank: r.gpu_count for r in candidate.ranks}
    for r in baseline.ranks:
        if r.rank in gpus_c and gpus_c[r.rank] != r.gpu_count:
            return Mismatch("gpu_count", "both", f"rank {r.rank} ran on {r.gpu_count} GPU(s) in the baseline and on "
                            f"{gpus_c[r.rank]} in the candidate: another GPU count", partial=False)
    return None


def _ranks_differ(baseline: Report, candidate: Report) -> Mismatch | None:
    """Both runs whole by what they say of themselves, yet not the same ranks."""
    ranks_b, ranks_c = {r.rank for r in baseline.ranks}, {r.rank for r in candidate.ranks}
    if ranks_b == ranks_c:
        return None
    parts = [f"only the {side} has {_ranks_text(sorted(only))}"
             for side, only in (("baseline", ranks_b - ranks_c), ("candidate", ranks_c - ranks_b)) if only]
    return Mismatch("ranks_differ", "both", f"the baseline has {len(ranks_b)} rank(s) and the candidate "
                    f"{len(ranks_c)}: {' and '.join(parts)}", partial=True)


def gpu_models(report: Report) -> frozenset[str | None]:
    """The GPU models the run's ranks ran on; None for a GPU whose model the trace does not name."""
    return frozenset(m for r in report.ranks for m in _rank_models(r))


def _rank_models(r: RankReport) -> set[str | None]:
    if r.devices:
        return {d.model or r.device for d in r.devices}
    return {r.device} if r.device is not None else set()


def _gpu_model(baseline: Report, candidate: Report) -> Mismatch | None:
    models_b, models_c = gpu_models(baseline), gpu_models(candidate)
    if models_b == models_c:  # a GPU unnamed on both sides (an old trace) counts as the same: nothing tells otherwise
        return None
    return Mismatch("gpu_model", "both", f"the baseline ran on {_models_text(models_b)} and the candidate on "
                    f"{_models_text(models_c)}: another GPU model", partial=False)


def _models_text(models: frozenset[str | None]) -> str:
    if not models:
        return "no GPU (a CPU-only trace)"
    named = sorted(m for m in models if m is not None)
    unnamed = ["a GPU the trace does not name"] if None in models else []
    return " and ".join([*named, *unnamed])


def _workload(baseline: Report, candidate: Report) -> Mismatch | None:
    kinds_b, kinds_c = {r.workload for r in baseline.ranks}, {r.workload for r in candidate.ranks}
    if kinds_b == kinds_c:
        return None
    return Mismatch("workload", "both", f"the baseline is {_kinds_text(kinds_b)} and the candidate "
                    f"{_kinds_text(kinds_c)}: another workload", partial=False)


def _kinds_text(kinds: AbstractSet[str | None]) -> str:
    named = sorted(k for k in kinds if k is not None)
    unknown = ["of a kind its traces cannot tell"] if None in kinds or not kinds else []
    return " and ".join([*named, *unknown])


def no_steady_steps(side: Which, report: Report) -> Mismatch | None:
    """Nothing to take a step time or a per-step test over: all warm-up, no ProfilerStep, or no trace at all."""
    steps = job_steps(report)
    if len(steps):
        return None
    why = (f"its {steps.warmup_excluded} profiler step(s) are all start-up or warm-up" if steps.warmup_excluded
           else "its traces hold no profiler steps (ProfilerStep#N)" if report.ranks else "it has no trace")
    return Mismatch("no_steady_steps", side, f"the {side} has no steady steps to compare: {why}", partial=False)


def _ranks_text(ranks: Iterable[int]) -> str:
    listed = list(ranks)
    shown = ", ".join(str(r) for r in listed[:8]) + (f" and {len(listed) - 8} more" if len(listed) > 8 else "")
    return f"rank{'s' if len(listed) > 1 else ''} {shown}"
