"""The kernels that took the GPU time, merged over ranks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from gpuscope.figures.base import KERNEL_COLORS, Absent, ChartResult, percent, safe_text, styled
from gpuscope.model.rank import RankReport

TOP_KERNELS = 15


@dataclass(frozen=True)
class KernelTotal:
    """One kernel name summed over every rank."""

    name: str
    category: str
    count: int
    total_us: float
    share: float | None
    """Share of all kernel time of all ranks; None when the ranks do not say their kernel total."""


def merge_kernels(ranks: Sequence[RankReport]) -> list[KernelTotal]:
    """Each rank's top kernels summed by name, largest first."""
    totals: dict[str, list[float]] = {}
    category: dict[str, str] = {}
    all_kernels_us = 0.0
    known_total = True
    for rank in ranks:
        anchor = next((k for k in rank.top_kernels if k.share > 0), None)
        if anchor is None:
            known_total = known_total and not rank.top_kernels
        else:
            # Every KernelStat's share is of the rank's whole kernel time: one gives that total back.
            all_kernels_us += anchor.total_us / anchor.share
        for k in rank.top_kernels:
            entry = totals.setdefault(k.name, [0.0, 0.0])
            entry[0] += k.count
            entry[1] += k.total_us
            category.setdefault(k.name, k.category)
    merged = [KernelTotal(name=name, category=category[name], count=int(count), total_us=total,
                          share=total / all_kernels_us if known_total and all_kernels_us > 0 else None)
              for name, (count, total) in totals.items()]
    return sorted(merged, key=lambda k: k.total_us, reverse=True)


def top_kernels(ranks: Sequence[RankReport], *, limit: int = TOP_KERNELS) -> ChartResult:
    """Horizontal bars of the kernels with the most GPU time (ms), coloured compute / communication / memory."""
    kernels = merge_kernels(ranks)[:limit]
    if not kernels:
        return Absent("no kernels in this run (no profiler trace with GPU activity)")
    # Numbered labels stay distinct even where two long names shorten to the same text.
    labels = [f"{i}. {safe_text(k.name, 60)}" for i, k in enumerate(kernels, 1)]
    fig = go.Figure()
    for cat, color in KERNEL_COLORS.items():
        rows = [(label, k) for label, k in zip(labels, kernels, strict=True) if k.category == cat]
        if not rows:
            continue
        fig.add_trace(go.Bar(
            y=[label for label, _ in rows], x=[k.total_us / 1000 for _, k in rows], orientation="h", name=cat,
            marker_color=color,
            customdata=[[safe_text(k.name), k.count, percent(k.share)] for _, k in rows],
            hovertemplate="%{customdata[0]}<br>%{x:.3~f} ms in %{customdata[1]} calls"
                          " (%{customdata[2]} of kernel time)<extra></extra>"))
    fig.update_layout(yaxis={"categoryorder": "array", "categoryarray": labels[::-1], "automargin": True},
                      xaxis_title="total time (ms)", barmode="stack")
    title = "Top kernels" + (f" (all {len(ranks)} ranks)" if len(ranks) > 1 else "")
    return styled(fig, title=title, height=140 + 24 * len(kernels))
