"""Live samples of a run summarised into the evidence the diagnosis reads (placeholder until collectors land)."""

from __future__ import annotations

from gpuscope.model.report import LiveSummary
from gpuscope.model.run import Run


def summarize(run: Run) -> LiveSummary | None:
    if run.samples is None and run.stacks is None:
        return None
    return None
