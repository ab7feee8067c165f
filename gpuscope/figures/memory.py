"""Memory figures: a device's allocated and reserved bytes over the recording with the peak marked, and what the
memory held at the peak (the makeup)."""

from __future__ import annotations

from datetime import UTC, datetime

import plotly.graph_objects as go

from gpuscope.figures.base import Absent, ChartResult, percent, safe_text, styled
from gpuscope.format import gib
from gpuscope.model.memory import CATEGORIES, DeviceMemory
from gpuscope.model.trace import EPOCH_MIN_NS

CATEGORY_LABELS = {"parameters": "Parameters", "gradients": "Gradients", "optimizer_state": "Optimizer state",
                   "activations": "Activations", "temporaries": "Temporaries", "unknown": "Unknown"}
CATEGORY_COLORS = {"parameters": "#1f77b4", "gradients": "#9467bd", "optimizer_state": "#8c564b",
                   "activations": "#ff7f0e", "temporaries": "#bcbd22", "unknown": "#c7c7c7"}
_GIB = 2**30


def device_title(d: DeviceMemory) -> str:
    return f"GPU {d.device}" + (f", rank {d.rank}" if d.rank is not None else "")


def memory_timeline(d: DeviceMemory) -> ChartResult:
    """Allocated (and reserved) GiB over the recording, the peak marked, the device's size drawn where known."""
    t = d.timeline
    if not t.allocated_bytes:
        return Absent("no allocations recorded on this device")
    timed = bool(t.time_us) and t.time_us[0] > 0
    clock = timed and t.time_us[0] >= EPOCH_MIN_NS // 1000  # else the trace's own clock: no time of day to show
    x: list[float] | list[int] = ([(u - t.time_us[0]) / 1e6 for u in t.time_us] if timed
                                  else list(range(len(t.allocated_bytes))))
    fig = go.Figure()
    base = "" if d.absolute else " (above the trace's start)"
    fig.add_trace(go.Scatter(x=x, y=[b / _GIB for b in t.allocated_bytes], name=f"allocated{base}",
                             mode="lines", line={"color": "#1f77b4", "shape": "hv"},
                             hovertemplate="%{x:.4f} s: %{y:.2f} GiB allocated<extra></extra>"))
    if t.reserved_bytes is not None:
        fig.add_trace(go.Scatter(x=x, y=[b / _GIB for b in t.reserved_bytes], name="reserved", mode="lines",
                                 line={"color": "#7f7f7f", "dash": "dot", "shape": "hv"},
                                 hovertemplate="%{x:.4f} s: %{y:.2f} GiB reserved<extra></extra>"))
    peak = max(range(len(t.allocated_bytes)), key=lambda i: t.allocated_bytes[i])
    fig.add_trace(go.Scatter(x=[x[peak]], y=[t.allocated_bytes[peak] / _GIB], name="peak", mode="markers+text",
                             marker={"color": "#d62728", "size": 11, "symbol": "diamond"},
                             text=[f"peak {gib(d.peak_allocated_bytes)}"], textposition="top center",
                             hovertemplate="peak: %{y:.2f} GiB<extra></extra>"))
    if d.device_bytes is not None and d.absolute:
        fig.add_hline(y=d.device_bytes / _GIB, line={"color": "#d62728", "dash": "dash", "width": 1},
                      annotation_text=f"device {gib(d.device_bytes)}", annotation_position="top left")
    start = (" from " + datetime.fromtimestamp(t.time_us[0] / 1e6, tz=UTC).strftime("%H:%M:%S UTC") if clock
             else " from the first event")
    fig.update_layout(xaxis_title=f"seconds{start}" if timed else "allocator event", yaxis_title="GiB",
                      yaxis={"rangemode": "tozero"})
    return styled(fig, title=f"Memory over the recording, {device_title(d)}", height=360)


def memory_makeup(d: DeviceMemory) -> ChartResult:
    """One stacked bar: what the allocated memory held at the peak, by category."""
    parts = [m for m in d.makeup if m.bytes]
    if not parts:
        return Absent("nothing was live at the peak, or what was live cannot be told")
    fig = go.Figure()
    for m in sorted(parts, key=lambda m: CATEGORIES.index(m.category)):
        fig.add_trace(go.Bar(y=["at the peak"], x=[m.bytes / _GIB], orientation="h", name=CATEGORY_LABELS[m.category],
                             marker={"color": CATEGORY_COLORS[m.category]}, customdata=[[percent(m.share)]],
                             hovertemplate=safe_text(CATEGORY_LABELS[m.category])
                             + ": %{x:.2f} GiB (%{customdata[0]})<extra></extra>"))
    fig.update_layout(barmode="stack", xaxis_title="GiB", yaxis={"visible": False})
    return styled(fig, title=f"What the memory held at the peak, {device_title(d)}", height=200)
