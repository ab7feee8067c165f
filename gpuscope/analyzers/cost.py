"""Cost of a run (placeholder until the cost model lands)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuscope.analyzers.verdict import Diagnosis
from gpuscope.model.cost import JobSpec, Price
from gpuscope.model.report import CostReport, LiveSummary, RankReport, Recommendation
from gpuscope.model.run import Run


def assess(run: Run, ranks: Sequence[RankReport], live: LiveSummary | None, diagnosis: Diagnosis,
           price: Price | None, job: JobSpec) -> tuple[CostReport | None, tuple[Recommendation, ...]]:
    return None, diagnosis.recommendations
