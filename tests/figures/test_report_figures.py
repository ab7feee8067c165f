from __future__ import annotations

from dataclasses import replace

import plotly.graph_objects as go
import pytest

from gpuscope.figures import (
    Absent,
    CostCard,
    compare,
    compare_breakdown,
    cost_card,
    frame_tree,
    merge_kernels,
    rank_comparison,
    safe_text,
    stack_icicle,
    step_breakdown,
    top_kernels,
    waste_breakdown,
)
from gpuscope.figures.base import BREAKDOWN_LABELS
from gpuscope.model.cost import CostReport
from gpuscope.model.diagnosis import JobFacts
from tests.figures.fixtures import empty_report, full_report, rank, stack_samples


def _fig(result: object) -> go.Figure:
    assert isinstance(result, go.Figure), result
    return result


def test_step_breakdown_stacks_to_the_step_time_in_plugin_order() -> None:
    fig = _fig(step_breakdown(rank(steps=3)))
    assert [t.name for t in fig.data] == ["Kernel", "Memcpy", "DataLoader", "CPU Exec"]
    assert list(fig.data[0].x) == ["step 10", "step 11", "step 12"]
    for i in range(3):
        assert sum(t.y[i] for t in fig.data) == pytest.approx(10.0)  # ms
    assert fig.data[0].customdata[0][0] == "42.0%"


def test_step_breakdown_without_steps() -> None:
    whole = replace(rank(), per_step=())
    assert list(_fig(step_breakdown(whole)).data[0].x) == ["whole window"]
    assert isinstance(step_breakdown(replace(whole, step_breakdown_us=replace(whole.step_breakdown_us, kernel=0,
                                                                             memcpy=0, dataloader=0, cpu_exec=0))),
                      Absent)


def test_rank_comparison_needs_two_ranks() -> None:
    assert isinstance(rank_comparison([rank(0)]), Absent)
    fig = _fig(rank_comparison([rank(0), rank(1, kernel_us=2000.0)]))
    busy = next(t for t in fig.data if t.name == "GPU busy")
    assert list(busy.x) == ["rank 0", "rank 1"]
    kernel = next(t for t in fig.data if t.name == BREAKDOWN_LABELS["kernel"])
    assert list(kernel.y) == [4.0, 2.0]


def test_top_kernels_merge_ranks_and_escape_names() -> None:
    merged = merge_kernels([rank(0), rank(1)])
    assert [k.total_us for k in merged] == [18000.0, 6000.0]
    assert merged[0].share == pytest.approx(0.75) and merged[0].count == 60
    fig = _fig(top_kernels([rank(0), rank(1)]))
    assert {t.name for t in fig.data} == {"compute", "communication"}
    label = fig.data[0].y[0]
    assert label.startswith("1. void sgemm&lt;float, 128&gt;")
    assert isinstance(top_kernels([replace(rank(), top_kernels=())]), Absent)


def test_icicle_counts_samples_inclusively() -> None:
    tree = frame_tree(stack_samples())
    values = dict(zip(tree.labels, tree.values, strict=True))
    assert values["all samples"] == 100 and values["train"] == 100
    assert values["wait"] == 60 and values["forward"] == 30 and values["backward"] == 10
    assert "&lt;module&gt;" in values
    pruned = frame_tree(stack_samples(), min_share=0.2)
    assert "backward" not in pruned.labels
    assert set(pruned.parents) <= set(pruned.ids) | {""}
    assert isinstance(stack_icicle(None), Absent)
    _fig(stack_icicle(stack_samples()))


def test_cost_card_prints_unknowns_as_na() -> None:
    card = cost_card(CostReport(gpu_hours=1.5, usd_per_gpu_hour=None, price_source=None, total_usd=None,
                                wasted_usd=None))
    assert isinstance(card, CostCard)
    rows = dict(card.rows)
    assert rows["This run"] == "n/a (1.5 GPU-h)" and rows["Wasted"] == "n/a" and rows["Per hour"] == "n/a"
    assert "--job-hours" in rows["Whole job"]
    assert isinstance(cost_card(None), Absent)
    full = cost_card(full_report().cost)
    assert isinstance(full, CostCard) and dict(full.rows)["Wasted"] == "50% of the cost"


def test_waste_bar_adds_up_to_the_total() -> None:
    fig = _fig(waste_breakdown(full_report().cost))
    assert {t.name: t.x[0] for t in fig.data} == {"useful": 3.0, "idle": 1.0, "input-starved": 2.0}
    assert isinstance(waste_breakdown(None), Absent)
    assert isinstance(waste_breakdown(CostReport(gpu_hours=1, usd_per_gpu_hour=2, price_source=None, total_usd=2,
                                                 wasted_usd=None)), Absent)


def test_compare_deltas_and_direction() -> None:
    a = full_report()
    # The compared figures are the job's facts (one value each): a faster run is one whose facts say so.
    faster = replace(a, facts=JobFacts(step_time_us=5000.0, gpu_busy=0.8, gpu_busy_source="trace"))
    rows = {d.label: d for d in compare(a, faster)}
    assert rows["Step time (mean)"].change == "-5 ms (-50%)" and rows["Step time (mean)"].better is True
    assert rows["GPU busy (trace)"].change == "+38.0 pts" and rows["GPU busy (trace)"].better is True
    assert rows["Verdict"].change == "same"
    empty = {d.label: d for d in compare(a, empty_report())}
    assert empty["Step time (mean)"].b == "n/a" and empty["Step time (mean)"].change == "n/a"
    assert empty["Verdict"].b == "n/a" and empty["Total cost"].better is None


def test_compare_breakdown() -> None:
    fig = _fig(compare_breakdown(full_report(), full_report(name="after")))
    assert list(fig.data[0].x) == ["A: resnet &lt;b&gt;bold&lt;/b&gt;", "B: after"]
    assert isinstance(compare_breakdown(full_report(), empty_report()), Absent)


def test_safe_text() -> None:
    assert safe_text('<a href="x">y</a>') == '&lt;a href="x"&gt;y&lt;/a&gt;'
    assert safe_text("abcdef", 4) == "abc…"
