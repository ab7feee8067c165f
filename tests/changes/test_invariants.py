"""Whatever the steps, ranks and stage shares: each run's parts add up to its step time and the parts' changes to
the step time's change (the split is additive by construction), and no part is negative."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.changes import explain
from gpuscope.model.diagnosis import Stage, Verdict
from gpuscope.model.rank import Communication, Memory, RankReport, StepBreakdown, StepRecord
from gpuscope.model.report import Report, RunSummary

CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")
breakdowns = st.lists(st.floats(min_value=0.0, max_value=5e5), min_size=8, max_size=8).filter(lambda xs: sum(xs) > 1)


def rank_report(number: int, parts: list[list[float]]) -> RankReport:
    steps = tuple(StepRecord(name=str(i), start_us=i * 1e6, duration_us=sum(p),
                             breakdown_us=StepBreakdown(**dict(zip(CATEGORIES, p, strict=True))), gpu_busy=0.5)
                  for i, p in enumerate(parts))
    return RankReport(rank=number, window_us=sum(s.duration_us for s in steps), steps=len(steps),
                      step_time_us=sum(s.duration_us for s in steps) / len(steps), gpu_busy=0.5,
                      step_breakdown_us=StepBreakdown(), temporal=None, idle_breakdown_us=None,
                      communication=Communication(total_us=0.0, exposed_us=0.0, overlap=None),
                      memory=Memory(peak_allocated_bytes=None, device_bytes=None), per_step=steps)


@st.composite
def reports(draw: st.DrawFn) -> Report:
    n_ranks = draw(st.integers(1, 3))
    n_steps = draw(st.integers(1, 7))
    ranks = tuple(rank_report(r, [draw(breakdowns) for _ in range(n_steps)]) for r in range(n_ranks))
    share = st.floats(min_value=0.0, max_value=0.5)
    shares: dict[Stage, float | None] = {"idle": draw(share), "communication": draw(share),
                                         "data_loading": 0.1, "host_overhead": 0.1, "memory": 0.0,
                                         "gpu_compute": 0.3}
    return Report(run=RunSummary(id="r", kind="trace"), ranks=ranks,
                  verdict=Verdict(primary=None, resource="unknown"), stage_shares=shares)


@settings(max_examples=60, deadline=None)
@given(reports(), reports())
def test_parts_add_up_on_both_sides_and_to_the_change(base: Report, cand: Report) -> None:
    d = explain(base, cand)
    b, c = d.step_time_us.baseline, d.step_time_us.candidate
    assert b is not None and c is not None and d.change_us is not None
    scale = max(b, c)
    assert abs(sum(p.baseline_us for p in d.parts) - b) <= 1e-9 * scale
    assert abs(sum(p.candidate_us for p in d.parts) - c) <= 1e-9 * scale
    assert abs(sum(p.change_us for p in d.parts) - d.change_us) <= 1e-9 * scale
    assert all(p.baseline_us >= -1e-9 * scale and p.candidate_us >= -1e-9 * scale for p in d.parts)
    # The job's step is its slowest rank's, step by step, over the ranks both runs have (rank numbers 0..n-1 here):
    # a rank one run lacks is left out of both sides.
    common = min(len(base.ranks), len(cand.ranks))
    assert d.ranks == tuple(range(common)) and bool(d.missing_ranks) == (len(base.ranks) != len(cand.ranks))
    steps = len(base.ranks[0].per_step)
    slowest = [max(r.per_step[i].duration_us for r in base.ranks[:common]) for i in range(steps)]
    assert abs(b - sum(slowest) / len(slowest)) <= 1e-9 * scale  # every steady step, an outlier too
