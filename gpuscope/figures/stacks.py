"""py-spy stack samples as an icicle chart: where the target's threads spent their time."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import plotly.graph_objects as go

from gpuscope.figures.base import Absent, ChartResult, safe_text, styled
from gpuscope.model.run import StackSamples

MIN_SHARE = 0.005
"""Frames under this share of all samples are left out: unreadable slivers that only add bytes."""
MAX_DEPTH = 60


@dataclass(frozen=True)
class FrameTree:
    """The flattened call tree plotly's icicle takes: parallel lists, ``parents`` by id, ``values`` inclusive."""

    ids: list[str]
    labels: list[str]
    parents: list[str]
    values: list[int]
    frames: list[str]
    paths: list[tuple[str, ...]] = field(default_factory=list)
    """The frames of each kept node (root excluded), outermost first."""


def frame_tree(stacks: StackSamples, *, min_share: float = MIN_SHARE, max_depth: int = MAX_DEPTH) -> FrameTree:
    """Build the inclusive call tree from stack samples (frames outermost first), pruning small nodes."""
    counts = Counter(stacks.samples["stack_id"].tolist())
    total = sum(counts.values())
    inclusive: Counter[tuple[str, ...]] = Counter()
    for stack_id, count in counts.items():
        frames = stacks.stacks.get(stack_id, ("<unknown stack>",))[:max_depth]
        for depth in range(1, len(frames) + 1):
            inclusive[frames[:depth]] += count
    floor = min_share * total
    kept = sorted(path for path, value in inclusive.items() if value >= floor)
    node_id = {path: f"n{i}" for i, path in enumerate(kept, 1)}
    tree = FrameTree(ids=["root"], labels=["all samples"], parents=[""], values=[total], frames=["all samples"])
    for path in kept:
        tree.ids.append(node_id[path])
        tree.parents.append(node_id.get(path[:-1], "root"))
        tree.values.append(inclusive[path])
        tree.labels.append(safe_text(_function(path[-1]), 40))
        tree.frames.append(safe_text(path[-1], 160))
        tree.paths.append(path)
    return tree


def stack_icicle(stacks: StackSamples | None, *, min_share: float = MIN_SHARE) -> ChartResult:
    """Icicle (a flame graph, top-down) of the sampled stacks, sized by sample count."""
    if stacks is None or stacks.samples.empty:
        return Absent("no stack samples in this run (py-spy did not run or saw no Python thread)")
    tree = frame_tree(stacks, min_share=min_share)
    fig = go.Figure(go.Icicle(
        ids=tree.ids, labels=tree.labels, parents=tree.parents, values=tree.values, branchvalues="total",
        customdata=tree.frames, tiling={"orientation": "v"}, root={"color": "#e8e8e8"}, maxdepth=12,
        hovertemplate="%{customdata}<br>%{value} samples (%{percentRoot:.1%} of all)<extra></extra>",
    ))
    # One band per frame level shown (up to maxdepth), so a shallow stack is not drawn as two huge slabs.
    depth = max((len(p) for p in tree.paths), default=0) + 1
    fig = styled(fig, title=f"Stack samples ({tree.values[0]:,} samples; click a frame to zoom)",
                 height=120 + 34 * min(depth, 12))
    fig.update_layout(margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return fig


def _function(frame: str) -> str:
    """ "load (data.py:12)" -> "load"."""
    return frame.split(" (", 1)[0] or frame
