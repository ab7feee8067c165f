"""One rank's serving figures, where the rank is read: its phases and its graph replays (``RankReport.serving``)."""

from __future__ import annotations

from gpuscope.analyzers.serving.graphs import graph_replays, with_graph_work
from gpuscope.analyzers.serving.phases import serving_phases
from gpuscope.model.serving import RankServing
from gpuscope.model.trace import RankTrace

__all__ = ["rank_serving", "with_graph_work"]


def rank_serving(trace: RankTrace, *, estimated_graph_us: float = 0.0) -> RankServing | None:
    """The rank's serving steps by phase and its graph replays; None when it has neither. ``trace`` is the one
    ``with_graph_work`` gave (replays the profiler did not record carry their estimated GPU work)."""
    phases = serving_phases(trace)
    graphs = graph_replays(trace)
    if not phases.stats and not graphs:
        return None
    return RankServing(phases=phases.stats, phase_source=phases.source,  # type: ignore[arg-type]
                       graphs=graphs, estimated_graph_us=estimated_graph_us)
