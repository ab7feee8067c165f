"""The change of step time as a waterfall: from the baseline's step, each part's change, to the candidate's step.

The bars add up by construction (the Diff's parts add up to the change); parts that moved less than
``SMALL_SHARE`` of the baseline's step are drawn as one bar so a dozen kernel families do not crowd the chart.
"""

from __future__ import annotations

import plotly.graph_objects as go

from gpuscope.figures.base import Absent, ChartResult, safe_text, styled
from gpuscope.format import ms
from gpuscope.model.diff import Diff, DiffPart

SMALL_SHARE = 0.005
INCREASE, DECREASE, TOTAL = "#d62728", "#2ca02c", "#7f7f7f"


def waterfall(diff: Diff) -> ChartResult:
    """Baseline step, the parts' changes (largest first), candidate step; in ms."""
    base, cand = diff.step_time_us.baseline, diff.step_time_us.candidate
    if base is None or cand is None or not diff.parts:
        return Absent("no step times to split (a run without profiler steps)")
    bars = _bars(diff.parts, base)
    labels = ["baseline step", *(label for label, _ in bars), "candidate step"]
    values = [base / 1000, *(change / 1000 for _, change in bars), cand / 1000]
    text = [ms(base), *(_signed(change) for _, change in bars), ms(cand)]
    fig = go.Figure(go.Waterfall(
        x=labels, y=values, measure=["absolute", *(["relative"] * len(bars)), "total"], text=text,
        textposition="outside", connector={"line": {"color": "#b0b0b0", "width": 1}},
        increasing={"marker": {"color": INCREASE}}, decreasing={"marker": {"color": DECREASE}},
        totals={"marker": {"color": TOTAL}}, hovertemplate="%{x}: %{text}<extra></extra>", cliponaxis=False))
    title = (f"Step time {ms(base)} → {ms(cand)}: {safe_text(diff.baseline.name, 30)} → "
             f"{safe_text(diff.candidate.name, 30)}")
    fig.update_layout(yaxis_title="ms per step", showlegend=False, xaxis={"type": "category", "tickangle": -30})
    return styled(fig, title=title, height=440)


def _bars(parts: tuple[DiffPart, ...], base_us: float) -> list[tuple[str, float]]:
    moved = sorted((p for p in parts if p.change_us), key=lambda p: -abs(p.change_us))
    big = [(p.label, p.change_us) for p in moved if abs(p.change_us) >= SMALL_SHARE * base_us]
    small = [p.change_us for p in moved if abs(p.change_us) < SMALL_SHARE * base_us]
    if len(small) == 1:
        big.append(next((p.label, p.change_us) for p in moved if p.change_us == small[0]))
    elif small:
        big.append((f"{len(small)} smaller parts", sum(small)))
    return big


def _signed(us: float) -> str:
    return ("+" if us > 0 else "-") + ms(abs(us))
