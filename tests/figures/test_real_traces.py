"""The figure builders over reports of the real sample traces (sample_traces/), analysed by the CLI."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuscope.cli.main import app
from gpuscope.figures import frame_tree, rank_comparison, step_breakdown, top_kernels
from gpuscope.model.codec import report_from_json
from gpuscope.model.report import Report
from tests.conftest import SAMPLES
from tests.figures.fixtures import stack_samples


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Report]:
    out = {}
    for name in ("resnet50_dataloader_bound", "dlrm_8rank"):
        result = CliRunner().invoke(app, ["analyze", str(SAMPLES / name), "--json", "--no-save"],
                                    env={"GPUSCOPE_HOME": str(tmp_path_factory.mktemp("home"))})
        assert result.exit_code == 0, result.output
        out[name] = report_from_json(result.stdout)
    return out


def test_step_bars_add_up_to_each_steps_duration(reports: dict[str, Report]) -> None:
    rank = reports["resnet50_dataloader_bound"].ranks[0]
    fig = step_breakdown(rank)
    assert isinstance(fig, go.Figure)
    assert len(fig.data[0].x) == len(rank.per_step) > 1
    for i, step in enumerate(rank.per_step):
        assert sum(t.y[i] for t in fig.data) == pytest.approx(step.duration_us / 1000, rel=1e-6)


def test_eight_ranks_compared_and_nccl_kernels_marked(reports: dict[str, Report]) -> None:
    ranks = reports["dlrm_8rank"].ranks
    fig = rank_comparison(ranks)
    assert isinstance(fig, go.Figure)
    assert list(fig.data[0].x) == [f"rank {r.rank}" for r in ranks]
    kernels = top_kernels(ranks)
    assert isinstance(kernels, go.Figure)
    assert "communication" in {t.name for t in kernels.data}


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 0.5))
def test_icicle_children_never_exceed_their_parent(min_share: float) -> None:
    tree = frame_tree(stack_samples(), min_share=min_share)
    value = dict(zip(tree.ids, tree.values, strict=True))
    children: dict[str, int] = {}
    for node, parent in zip(tree.ids, tree.parents, strict=True):
        if parent:
            children[parent] = children.get(parent, 0) + value[node]
    assert all(total <= value[parent] for parent, total in children.items())
    assert all(v >= min_share * value["root"] for v in tree.values)
