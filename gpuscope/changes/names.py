"""Kernels and operators whose time per step changed: matched by name, then by family, and those found on one
side only (appeared or disappeared; "unlisted" when the other side's table does not list every name, so the name
may have run there under its floor).

Each run's table is pooled over its ranks (``RankReport.profile``): time and calls per rank and steady step (per
second of the steady window when a rank has no profiler steps). A report saved before profiles were kept falls
back on each rank's top kernels (over the whole trace, warm-up included) and has no operators.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from gpuscope.analyzers.trace.families import COMMUNICATION_FAMILY, MEMORY_FAMILY, kernel_family
from gpuscope.model.diff import NameChange
from gpuscope.model.profile import NameTable
from gpuscope.model.rank import RankReport
from gpuscope.model.report import Report

Per = Literal["step", "second"]
NOT_COMPUTE = frozenset({COMMUNICATION_FAMILY, MEMORY_FAMILY})


@dataclass(frozen=True)
class Pooled:
    """One run's names, pooled over its ranks, per rank and step (or per second)."""

    per: Per
    us: dict[str, float] = field(default_factory=dict)
    calls: dict[str, float] = field(default_factory=dict)
    family: dict[str, str] = field(default_factory=dict)
    family_us: dict[str, float] = field(default_factory=dict)
    """Time by family, names left out of the tables included."""
    floor_us: float = 0.0
    """A name missing here may still have run up to this long (tables keep their top names only)."""
    source: str = "profile"
    """"profile", "top_kernels" (an older report) or "none"."""


def pooled(report: Report, which: Literal["kernels", "operators"]) -> Pooled:
    ranks = report.ranks
    if ranks and all(r.profile is not None for r in ranks):
        return _from_profiles(ranks, which)
    if which == "kernels" and ranks and all(r.top_kernels and r.steps for r in ranks):
        return _from_top_kernels(ranks)
    return Pooled(per="step", source="none")


def _from_profiles(ranks: Iterable[RankReport], which: Literal["kernels", "operators"]) -> Pooled:
    profiles = [r.profile for r in ranks if r.profile is not None]
    per: Per = "step" if all(p.steps > 0 for p in profiles) else "second"
    denominator = (sum(p.steps for p in profiles) if per == "step"
                   else sum(p.window_us for p in profiles) / 1e6)
    if denominator <= 0:
        return Pooled(per=per, source="none")
    acc = _Tally()
    for profile in profiles:
        table: NameTable = profile.kernels if which == "kernels" else profile.operators
        for row in table.rows:
            acc.add(row.name, row.family, row.total_us, row.count)
        for family, us in table.rest_families_us:
            acc.family_us[family] += us
        acc.floor_us += table.rest_max_us
    return acc.pooled(per, denominator, "profile")


def _from_top_kernels(ranks: Iterable[RankReport]) -> Pooled:
    ranks = list(ranks)
    acc = _Tally()
    for r in ranks:
        for k in r.top_kernels:
            acc.add(k.name, kernel_family(k.name, communication=k.category == "communication",
                                          memory=k.category == "memory"), k.total_us, k.count)
        acc.floor_us += min((k.total_us for k in r.top_kernels), default=0.0)
    return acc.pooled("step", sum(r.steps for r in ranks), "top_kernels")


class _Tally:
    """Totals over ranks, before they are divided by the steps (or seconds) they cover."""

    def __init__(self) -> None:
        self.us: dict[str, float] = defaultdict(float)
        self.calls: dict[str, float] = defaultdict(float)
        self.family: dict[str, str] = {}
        self.family_us: dict[str, float] = defaultdict(float)
        self.floor_us = 0.0

    def add(self, name: str, family: str, total_us: float, count: int) -> None:
        self.us[name] += total_us
        self.calls[name] += count
        self.family[name] = family
        self.family_us[family] += total_us

    def pooled(self, per: Per, denominator: float, source: str) -> Pooled:
        return Pooled(per=per, us={n: v / denominator for n, v in self.us.items()},
                      calls={n: v / denominator for n, v in self.calls.items()}, family=dict(self.family),
                      family_us={f: v / denominator for f, v in self.family_us.items()},
                      floor_us=self.floor_us / denominator, source=source)


def compute_families(table: Pooled) -> dict[str, float]:
    """Compute kernels' time by family (collectives and copies have stages of their own)."""
    return {f: us for f, us in table.family_us.items() if f not in NOT_COMPUTE and us > 0}


def changes(base: Pooled, cand: Pooled, *, top: int) -> tuple[NameChange, ...]:
    """The ``top`` names (or families) whose time per step changed most."""
    if base.source == "none" or cand.source == "none" or base.per != cand.per:
        return ()
    rows = [_by_name(n, base, cand) for n in base.us.keys() & cand.us.keys()]
    gone = [n for n in base.us if n not in cand.us]
    new = [n for n in cand.us if n not in base.us]
    rows += _by_family(gone, new, base, cand)
    rows.sort(key=lambda c: (-abs(c.change_us), c.name))
    return tuple(rows[:top])


def _by_name(name: str, base: Pooled, cand: Pooled) -> NameChange:
    b, c = base.us[name], cand.us[name]
    return NameChange(name=name, family=cand.family[name], match="name", baseline_us=b, candidate_us=c,
                      change_us=c - b, baseline_count=base.calls[name], candidate_count=cand.calls[name])


def _by_family(gone: list[str], new: list[str], base: Pooled, cand: Pooled) -> list[NameChange]:
    """Names without a match, paired by family where both sides have some; the rest appeared or disappeared."""
    gone_by: dict[str, list[str]] = defaultdict(list)
    new_by: dict[str, list[str]] = defaultdict(list)
    for n in gone:
        gone_by[base.family[n]].append(n)
    for n in new:
        new_by[cand.family[n]].append(n)
    out: list[NameChange] = []
    for family in sorted(gone_by.keys() & new_by.keys()):
        b_names, c_names = sorted(gone_by.pop(family)), sorted(new_by.pop(family))
        b, c = sum(base.us[n] for n in b_names), sum(cand.us[n] for n in c_names)
        label = (f"{b_names[0]} -> {c_names[0]}" if len(b_names) == len(c_names) == 1
                 else f"{family} ({len(b_names)} names -> {len(c_names)})")
        out.append(NameChange(
            name=label, family=family,
            match="family", baseline_us=b, candidate_us=c, change_us=c - b,
            baseline_count=sum(base.calls[n] for n in b_names), candidate_count=sum(cand.calls[n] for n in c_names),
            names_baseline=tuple(b_names), names_candidate=tuple(c_names)))
    out += _one_sided(gone_by, base, cand.floor_us, lambda u: (u, 0.0), "disappeared", "candidate")
    out += _one_sided(new_by, cand, base.floor_us, lambda u: (0.0, u), "appeared", "baseline")
    return out


def _one_sided(names_by: dict[str, list[str]], side: Pooled, other_floor: float,
               place: Callable[[float], tuple[float, float]], match: Literal["appeared", "disappeared"],
               other: str) -> list[NameChange]:
    """Names on one side only: appeared or disappeared when the other side lists every name; else unlisted there
    (it may have run there, under the other side's floor)."""
    out = []
    for family, names in names_by.items():
        for n in names:
            b, c = place(side.us[n])
            calls = side.calls[n]
            sure = other_floor <= 0
            note = "" if sure else (f"not among the {other}'s listed names: there it ran at most "
                                    f"{other_floor:.0f} µs per {side.per}, if at all")
            out.append(NameChange(name=n, family=family, match=match if sure else "unlisted", baseline_us=b,
                                  candidate_us=c, change_us=c - b,
                                  baseline_count=calls if match == "disappeared" else 0.0,
                                  candidate_count=calls if match == "appeared" else 0.0, note=note))
    return out
