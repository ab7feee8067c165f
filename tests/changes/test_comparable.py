"""The diff applies the gate's comparability check: a rank one run lacks is compared on neither side and never
priced as a saving, and another job is a caveat the diff leads with. Reports built in code, so every price is known
by construction."""

from __future__ import annotations

from dataclasses import replace

import pytest

import gpuscope
from gpuscope.api.changes import NotComparable
from gpuscope.changes import explain
from gpuscope.model.rank import DeviceBusy
from gpuscope.model.report import Report
from tests.gate.reports import report

STEPS_US = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0]
PRICE = 3.6  # USD per GPU-hour: 1e-9 USD per GPU-µs


def lost_rank(rep: Report, rank: int) -> Report:
    """``rep`` as read when ``rank``'s file could not be: the rank gone, its file named, the cost over the rest."""
    kept = tuple(r for r in rep.ranks if r.rank != rank)
    assert rep.cost is not None
    return replace(rep, ranks=kept, unread_rank_files=(f"rank{rank}.json: not valid JSON",), facts=None,
                   cost=replace(rep.cost, gpu_count=len(kept), per_step_usd=None))


def test_a_lost_rank_is_left_out_of_both_sides_and_priced_as_nothing() -> None:
    base = report(STEPS_US, name="b", ranks=4, usd_per_gpu_hour=PRICE)
    d = explain(base, lost_rank(base, 3))
    assert d.ranks == (0, 1, 2) and len(d.missing_ranks) == 1 and "rank3.json" in d.missing_ranks[0]
    assert d.baseline.gpu_count == d.candidate.gpu_count == 3
    # A mean step of 1000 µs on 3 GPUs at 1e-9 USD per GPU-µs on both sides: no change, no saving.
    assert d.baseline.usd_per_step == d.candidate.usd_per_step == pytest.approx(1000.0 * 3 * 1e-9)
    assert d.price.usd_per_step == 0.0 and d.usd_per_month == 0.0 and d.caveats == ()


def test_the_api_refuses_a_lost_rank_unless_allowed() -> None:
    base = report(STEPS_US, name="b", ranks=4, usd_per_gpu_hour=PRICE)
    with pytest.raises(NotComparable, match="rank3.json") as refused:
        gpuscope.diff(base, lost_rank(base, 3))
    assert isinstance(refused.value, gpuscope.GpuscopeError) and not refused.value.strict
    assert gpuscope.diff(base, lost_rank(base, 3), allow_partial=True).ranks == (0, 1, 2)


def on(rep: Report, model: str) -> Report:
    return replace(rep, ranks=tuple(replace(r, devices=(DeviceBusy(device=0, busy=0.8, model=model),))
                                    for r in rep.ranks))


def test_another_gpu_model_is_a_caveat_and_strict_refuses_it() -> None:
    base = on(report(STEPS_US, name="b"), "Tesla V100-SXM2-32GB")
    cand = on(report(STEPS_US, name="c"), "NVIDIA H100 80GB HBM3")
    d = gpuscope.diff(base, cand)
    (caveat,) = d.caveats
    assert "Tesla V100-SXM2-32GB" in caveat and "NVIDIA H100 80GB HBM3" in caveat and d.missing_ranks == ()
    with pytest.raises(NotComparable, match="another GPU model") as refused:
        gpuscope.diff(base, cand, strict=True)
    assert refused.value.strict


def test_runs_of_one_job_have_no_caveat() -> None:
    d = explain(report(STEPS_US, name="b", ranks=2), report(STEPS_US, name="c", ranks=2))
    assert d.caveats == () and d.missing_ranks == () and d.ranks == (0, 1)
