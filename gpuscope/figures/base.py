"""What every figure builder shares: the "no data" result, safe labels, colours and one look."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Final

import plotly.graph_objects as go

from gpuscope.format import pct, printable

percent = pct
"""A 0..1 share as printed text (gpuscope.format.pct, the figures' name for it)."""


@dataclass(frozen=True)
class Absent:
    """A chart the run has no data for, and the one line that says why (shown instead of an empty chart)."""

    reason: str


ChartResult = go.Figure | Absent
"""What a builder returns: a figure, or why there is none."""

# The PyTorch profiler TensorBoard plugin's step-time categories, in its priority order, with its colours' spirit:
# device work first (greens and blues), then host-side causes of idle GPU (warm colours).
BREAKDOWN_ORDER: Final = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")
BREAKDOWN_LABELS: Final = {"kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset",
                           "communication": "Communication", "runtime": "Runtime", "dataloader": "DataLoader",
                           "cpu_exec": "CPU Exec", "other": "Other"}
BREAKDOWN_COLORS: Final = {"kernel": "#2ca02c", "memcpy": "#17becf", "memset": "#9edae5",
                           "communication": "#9467bd", "runtime": "#d62728", "dataloader": "#ff7f0e",
                           "cpu_exec": "#8c564b", "other": "#c7c7c7"}
KERNEL_COLORS: Final = {"compute": "#2ca02c", "communication": "#9467bd", "memory": "#17becf"}
# One colour per GPU index, the same in every chart.
GPU_COLORS: Final = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                     "#bcbd22", "#17becf")

FONT: Final = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"


def gpu_color(index: int) -> str:
    return GPU_COLORS[index % len(GPU_COLORS)]


def safe_text(text: str, width: int | None = None) -> str:
    """A user string (run name, kernel or frame name) made inert for plotly labels.

    Plotly renders a small HTML subset (``<b>``, ``<a href>``, ``<br>``) and entities in text, so a
    kernel named ``f<float>`` or a run named ``<a href=...>`` would be markup; escaped, it is text.
    Control characters show as escapes (``format.printable``), as in every other view.
    """
    text = printable(text)
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return html.escape(text, quote=False)


def styled(fig: go.Figure, *, title: str, height: int) -> go.Figure:
    """Apply the one look every gpuscope chart shares."""
    fig.update_layout(
        title={"text": title, "x": 0.0, "xanchor": "left", "font": {"size": 15}},
        template="plotly_white",
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        font={"family": FONT, "size": 12},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right", "x": 1.0,
                "traceorder": "normal"},
        hoverlabel={"namelength": -1},
    )
    return fig
