"""Useful work: the MFU card (MFU, the peak it is measured against and its source, or why it is n/a) and the
roofline chart (each kernel family's arithmetic intensity against its achieved FLOP/s, log-log, under the run's
GPU's compute and memory ceilings for the type its model FLOPs ran in). Shared by the dashboard and the HTML report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import plotly.graph_objects as go

from gpuscope.figures.base import Absent, ChartResult, percent, safe_text, styled
from gpuscope.format import flag_text, share_or_flag
from gpuscope.model.efficiency import Efficiency, FamilyRoofline

COMPUTE_COLOR = "#d62728"
MEMORY_COLOR = "#1f77b4"
POINT_COLOR = "#2ca02c"
FLAGGED_COLOR = "#ff7f0e"
_NO_TRACE = "no profiler trace work counted in this run (a live run without a trace)"


@dataclass(frozen=True)
class EfficiencyCard:
    """The MFU card: label -> printed value ("n/a" where unknown), in reading order; ``note`` says why MFU is n/a."""

    rows: tuple[tuple[str, str], ...]
    note: str | None = None


def efficiency_card(eff: Efficiency | None) -> EfficiencyCard | Absent:
    """The figures the MFU card shows; Absent for a run without traces' work."""
    if eff is None:
        return Absent(_NO_TRACE)
    flops = eff.model_flops_per_step
    peak = (f"{eff.peak_flops / 1e12:,.4g} TFLOP/s {eff.peak_dtype} per GPU ({eff.gpu_model})"
            if eff.peak_flops is not None else "n/a")
    hardware = eff.hardware_flops_per_step
    rows: list[tuple[str, str]] = [
        ("MFU", share_or_flag(eff.mfu, eff.mfu_flag)),
        ("Model FLOPs per step", "n/a" if flops is None else f"{flops / 1e9:,.1f} GFLOP"),
    ]
    if flops is not None and hardware is not None and hardware > flops:
        rows += [("HFU", share_or_flag(eff.hfu, eff.hfu_flag)),
                 ("Hardware FLOPs per step", f"{hardware / 1e9:,.1f} GFLOP ({(hardware - flops) / 1e9:,.1f} re-run "
                                             "for checkpointed activations)")]
    if eff.left_out_flops_per_step > 0:
        rows.append(("Left out (above the peak)", f"{eff.left_out_flops_per_step / 1e9:,.1f} GFLOP per step"))
    rows += [
        ("Step time", "n/a" if eff.step_time_us is None else f"{eff.step_time_us / 1e3:,.1f} ms"),
        ("GPUs", str(eff.gpus)),
        ("Peak", peak),
        ("Peak source", eff.peak_source or "n/a"),
        ("Unmodelled GPU time", percent(eff.unmodelled_share)),
        ("MFU target", "n/a" if eff.attainable_mfu is None else
         f"{percent(eff.attainable_mfu, 0)} ({eff.target_mfu_source or 'default'})"),
    ]
    return EfficiencyCard(rows=tuple(rows), note=_note(eff))


def _note(eff: Efficiency) -> str | None:
    """Why MFU is n/a, or what is above the GPU's ceilings and why."""
    if eff.mfu_flag is not None:
        return f"MFU {flag_text(eff.mfu_flag)}: {eff.mfu_flag.detail}"
    if eff.mfu is None:
        return f"MFU n/a: {eff.mfu_note}"
    left = [a for a in eff.above_ceiling if not a.in_mfu]
    if left:
        return f"Left out of MFU, {flag_text(left[0].flag)}: {left[0].flag.detail}"
    return None


def _placed(f: FamilyRoofline) -> bool:
    return (f.intensity is not None and f.achieved_tflops is not None and f.intensity > 0
            and f.achieved_tflops > 0)


def roofline(eff: Efficiency | None) -> ChartResult:
    """Each kernel family as a point (intensity, achieved TFLOP/s), sized by its GPU time, under the ceilings of
    the run's GPU; without a spec for the GPU the points are drawn and the title says why there are no ceilings."""
    if eff is None:
        return Absent(_NO_TRACE)
    points = [f for f in eff.families if _placed(f)]
    if not points:
        why = eff.mfu_note if eff.model_flops_per_step is None and eff.mfu_note else \
            "no kernel family with counted FLOPs and bytes"
        return Absent(f"no roofline: {why}")
    fig = go.Figure()
    x_low = min(f.intensity or 1.0 for f in points) / 3
    x_high = max(f.intensity or 1.0 for f in points) * 3
    peak, bandwidth = eff.peak_flops, eff.memory_bandwidth_bytes_per_s
    if peak and bandwidth:
        ridge = peak / bandwidth
        x_low, x_high = min(x_low, ridge / 10), max(x_high, ridge * 10)
        _ceilings(fig, x_low, x_high, peak, bandwidth, eff.peak_dtype or "")
        title = (f"Roofline: {safe_text(eff.gpu_model or 'GPU', 40)}, {eff.peak_dtype} peak "
                 f"{peak / 1e12:,.4g} TFLOP/s, {bandwidth / 1e12:,.3g} TB/s")
    else:
        title = "Roofline: no ceilings (" + safe_text(_no_ceiling(eff), 90) + ")"
    total = sum(f.gpu_us for f in points) or 1.0
    for name, chosen, color in (("kernel families", [f for f in points if f.flag is None], POINT_COLOR),
                                ("above a ceiling (hover: the cause)", [f for f in points if f.flag], FLAGGED_COLOR)):
        if chosen:
            _points(fig, name, chosen, color, total)
    fig.update_layout(xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
                      yaxis={"type": "log", "title": "achieved TFLOP/s (per GPU)"})
    return styled(fig, title=title, height=420)


def _points(fig: go.Figure, name: str, points: list[FamilyRoofline], color: str, total: float) -> None:
    fig.add_trace(go.Scatter(
        x=[f.intensity for f in points], y=[f.achieved_tflops for f in points], mode="markers+text",
        name=name, text=[safe_text(f.family, 30) for f in points], textposition="top center",
        marker={"color": color, "size": [8 + 30 * math.sqrt(f.gpu_us / total) for f in points],
                "line": {"width": 1, "color": "#1b5e20"}, "symbol": "x" if color == FLAGGED_COLOR else "circle"},
        customdata=[[safe_text(f.family), f"{f.gpu_us / 1e3:,.2f}", _num(f.achieved_tb_s, ".3f"),
                     share_or_flag(f.roofline_share, f.flag), f.bound or "n/a",
                     safe_text(f.flag.detail, 300) if f.flag else ""] for f in points],
        hovertemplate=("%{customdata[0]}<br>%{y:.3~f} TFLOP/s at %{x:.3~g} FLOP/byte (%{customdata[2]} TB/s)"
                       "<br>%{customdata[1]} ms of GPU time a step · %{customdata[3]} of the roofline "
                       "(%{customdata[4]} bound)<br>%{customdata[5]}<extra></extra>")))


def _ceilings(fig: go.Figure, x_low: float, x_high: float, peak: float, bandwidth: float, dtype: str) -> None:
    ridge = peak / bandwidth
    fig.add_trace(go.Scatter(x=[x_low, ridge], y=[x_low * bandwidth / 1e12, peak / 1e12], mode="lines",
                             name=f"memory ceiling ({bandwidth / 1e12:,.3g} TB/s)",
                             line={"color": MEMORY_COLOR, "width": 2},
                             hovertemplate="memory bound: %{y:.3~f} TFLOP/s at %{x:.3~g} FLOP/byte<extra></extra>"))
    fig.add_trace(go.Scatter(x=[ridge, x_high], y=[peak / 1e12, peak / 1e12], mode="lines",
                             name=f"compute ceiling ({dtype} {peak / 1e12:,.4g} TFLOP/s)",
                             line={"color": COMPUTE_COLOR, "width": 2},
                             hovertemplate="compute bound: %{y:.4~f} TFLOP/s<extra></extra>"))


def _no_ceiling(eff: Efficiency) -> str:
    if eff.peak_flops is None:
        return eff.mfu_note or "the GPU is not in the spec table"
    return f"the spec table has no memory bandwidth for {eff.gpu_model}"


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)
