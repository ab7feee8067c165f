"""The terminal's efficiency section: model FLOPs per step, the peak and its source, MFU (or why it is n/a), the
unmodelled share, and the roofline per kernel family. Its parts serve `gpuscope ops` too."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuscope.format import pct
from gpuscope.model.efficiency import Efficiency, FamilyRoofline

FAMILIES_SHOWN = 8


def num(value: float | None, fmt: str) -> str:
    """A figure in ``fmt``, or "n/a" where unknown."""
    return "n/a" if value is None else format(value, fmt)


def mfu_lines(eff: Efficiency) -> list[Text]:
    """MFU as stated (FLOPs over step time x GPUs x the peak of the GPU in the table), or "MFU n/a" with the
    reason; and the peak's source."""
    if eff.mfu is not None and eff.peak_flops is not None:
        lines = [Text.assemble(("MFU ", "bold"), f"{pct(eff.mfu)}", (
            f" = FLOPs / ({(eff.step_time_us or 0) / 1e3:.1f} ms step x {eff.gpus} GPU x "
            f"{eff.peak_flops / 1e12:g} TFLOP/s {eff.peak_dtype} peak of {eff.gpu_model})"))]
    else:
        lines = [Text.assemble(("MFU n/a", "bold"), f": {eff.mfu_note}")]
    if eff.peak_source:
        lines.append(Text(f"peak: {eff.peak_source}", style="dim"))
    return lines


def family_table(families: Sequence[FamilyRoofline], *, limit: int = FAMILIES_SHOWN) -> Table:
    """Kernel families against the roofline: time, achieved TFLOP/s and TB/s, intensity, share of the roofline."""
    table = Table("kernel family", "GPU ms/step", "TFLOP/s", "TB/s", "FLOP/byte", "% of roofline", box=None)
    for f in families[:limit]:
        table.add_row(Text(f.family), f"{f.gpu_us / 1e3:.2f}", num(f.achieved_tflops, ".2f"),
                      num(f.achieved_tb_s, ".3f"), num(f.intensity, ".1f"),
                      "n/a" if f.roofline_share is None else pct(f.roofline_share))
    return table


def efficiency_panel(eff: Efficiency) -> RenderableType:
    """The section; every string from the trace goes in as plain Text (never markup)."""
    flops = eff.model_flops_per_step
    lines: list[RenderableType] = [Text.assemble(
        ("model FLOPs per step ", "bold"), "n/a" if flops is None else f"{flops / 1e9:,.1f} GFLOP",
        f" · unmodelled GPU time {pct(eff.unmodelled_share)}" if eff.unmodelled_share is not None else "")]
    lines.extend(mfu_lines(eff))
    if eff.families:
        lines.append(family_table(eff.families))
    if eff.unmodelled:
        lines.append(Text("unmodelled: " + "; ".join(f"{u.name} {u.gpu_us / 1e3:.2f} ms"
                                                      for u in eff.unmodelled[:5]), style="dim"))
    return Panel(Group(*lines), title="useful work", title_align="left")
