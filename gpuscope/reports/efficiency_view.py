"""The terminal's efficiency section: model FLOPs per step, the peak and its source, MFU (or why it is n/a), the
unmodelled share, and the roofline per kernel family."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuscope.format import pct
from gpuscope.model.efficiency import Efficiency


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def efficiency_panel(eff: Efficiency) -> RenderableType:
    """The section; every string from the trace goes in as plain Text (never markup)."""
    flops = eff.model_flops_per_step
    lines: list[RenderableType] = [Text.assemble(
        ("model FLOPs per step ", "bold"), "n/a" if flops is None else f"{flops / 1e9:,.1f} GFLOP",
        f" · unmodelled GPU time {pct(eff.unmodelled_share)}" if eff.unmodelled_share is not None else "")]
    if eff.mfu is not None and eff.peak_flops is not None:
        lines.append(Text.assemble(("MFU ", "bold"), f"{pct(eff.mfu)}", (
            f" = FLOPs / ({(eff.step_time_us or 0) / 1e3:.1f} ms step x {eff.gpus} GPU x "
            f"{eff.peak_flops / 1e12:g} TFLOP/s {eff.peak_dtype} peak of {eff.gpu_model})")))
    else:
        lines.append(Text.assemble(("MFU n/a", "bold"), f": {eff.mfu_note}"))
    if eff.peak_source:
        lines.append(Text(f"peak: {eff.peak_source}", style="dim"))
    if eff.families:
        table = Table("kernel family", "GPU ms/step", "TFLOP/s", "TB/s", "FLOP/byte", "% of roofline", box=None)
        for f in eff.families[:8]:
            table.add_row(Text(f.family), f"{f.gpu_us / 1e3:.2f}", _num(f.achieved_tflops, ".2f"),
                          _num(f.achieved_tb_s, ".3f"), _num(f.intensity, ".1f"),
                          "n/a" if f.roofline_share is None else pct(f.roofline_share))
        lines.append(table)
    if eff.unmodelled:
        lines.append(Text("unmodelled: " + "; ".join(f"{u.name} {u.gpu_us / 1e3:.2f} ms"
                                                      for u in eff.unmodelled[:5]), style="dim"))
    return Panel(Group(*lines), title="useful work", title_align="left")
