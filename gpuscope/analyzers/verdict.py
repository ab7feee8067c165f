"""The verdict: what held the GPUs back (placeholder until the diagnosis lands)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuscope.model.report import Finding, LiveSummary, RankReport, Recommendation, Verdict
from gpuscope.model.run import Run


@dataclass(frozen=True)
class Diagnosis:
    verdict: Verdict
    findings: tuple[Finding, ...] = ()
    recommendations: tuple[Recommendation, ...] = ()


def diagnose(run: Run, ranks: Sequence[RankReport], live: LiveSummary | None) -> Diagnosis:
    return Diagnosis(verdict=Verdict(primary=None, resource="unknown"))
