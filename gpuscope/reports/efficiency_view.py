"""The terminal's efficiency section: model and hardware FLOPs per step, the peak and its source, MFU and HFU (or why
they are n/a, or the flag where physics does not allow them), the work above the GPU's ceilings, the unmodelled
share, and the roofline per kernel family. Its parts serve `gpuscope ops` too."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuscope.format import flag_text, pct, share_or_flag
from gpuscope.model.efficiency import Efficiency, FamilyRoofline

FAMILIES_SHOWN = 8
ABOVE_SHOWN = 3


def num(value: float | None, fmt: str) -> str:
    """A figure in ``fmt``, or "n/a" where unknown."""
    return "n/a" if value is None else format(value, fmt)


def gflop(flops: float | None) -> str:
    return "n/a" if flops is None else f"{flops / 1e9:,.1f} GFLOP"


def flops_line(eff: Efficiency) -> Text:
    """Model FLOPs per step, and hardware FLOPs where the trace re-ran forward work for checkpointed activations."""
    parts: list[str | tuple[str, str]] = [("model FLOPs per step ", "bold"), gflop(eff.model_flops_per_step)]
    model, hardware = eff.model_flops_per_step, eff.hardware_flops_per_step
    if model is not None and hardware is not None and hardware > model:
        parts.append(f" · hardware {gflop(hardware)} ({gflop(hardware - model)} re-run for checkpointed "
                     "activations)")
    if eff.left_out_flops_per_step > 0:
        parts.append(f" · {gflop(eff.left_out_flops_per_step)} left out (above the peak)")
    if eff.unmodelled_share is not None:
        parts.append(f" · unmodelled GPU time {pct(eff.unmodelled_share)}")
    return Text.assemble(*parts)


def mfu_lines(eff: Efficiency) -> list[Text]:
    """MFU as stated (FLOPs over step time x GPUs x the peak of the GPU in the table), HFU beside it where it
    differs, or "MFU n/a" with the reason, or the flag and its cause where it is above 100%; and the peak's source."""
    if eff.mfu_flag is not None:
        lines = [Text.assemble(("MFU ", "bold"), flag_text(eff.mfu_flag), f": {eff.mfu_flag.detail}")]
    elif eff.mfu is not None and eff.peak_flops is not None:
        hfu = ""
        if eff.hfu is not None and eff.hfu != eff.mfu:
            hfu = f" · HFU {share_or_flag(eff.hfu, eff.hfu_flag)} (hardware FLOPs)"
        lines = [Text.assemble(("MFU ", "bold"), f"{pct(eff.mfu)}", (
            f" = FLOPs / ({(eff.step_time_us or 0) / 1e3:.1f} ms step x {eff.gpus} GPU x "
            f"{eff.peak_flops / 1e12:g} TFLOP/s {eff.peak_dtype} peak of {eff.gpu_model})"), hfu)]
    else:
        lines = [Text.assemble(("MFU n/a", "bold"), f": {eff.mfu_note}")]
    if eff.peak_source:
        lines.append(Text(f"peak: {eff.peak_source}", style="dim"))
    return lines


def ceiling_lines(eff: Efficiency) -> list[Text]:
    """The operators above the peak for their type, each with its cause (what is left out of MFU first)."""
    if not eff.above_ceiling:
        return []
    out = sorted(eff.above_ceiling, key=lambda a: a.in_mfu)
    lines = [Text(f"{len(out)} operator shape(s) above the peak for their type:", style="bold")]
    for a in out[:ABOVE_SHOWN]:
        fate = "kept in MFU" if a.in_mfu else "left out of MFU"
        lines.append(Text(f"  {flag_text(a.flag)}, {fate}: {a.flag.detail}"))
    if len(out) > ABOVE_SHOWN:
        lines.append(Text(f"  {len(out) - ABOVE_SHOWN} more (--json: efficiency.above_ceiling)", style="dim"))
    return lines


def family_table(families: Sequence[FamilyRoofline], *, limit: int = FAMILIES_SHOWN) -> Table:
    """Kernel families against the roofline: time, achieved TFLOP/s and TB/s, intensity, share of the roofline
    (or the flag where a figure is above a ceiling)."""
    table = Table("kernel family", "GPU ms/step", "TFLOP/s", "TB/s", "FLOP/byte", "% of roofline", box=None)
    for f in families[:limit]:
        table.add_row(Text(f.family), f"{f.gpu_us / 1e3:.2f}", num(f.achieved_tflops, ".2f"),
                      num(f.achieved_tb_s, ".3f"), num(f.intensity, ".1f"), share_or_flag(f.roofline_share, f.flag))
    return table


def efficiency_panel(eff: Efficiency) -> RenderableType:
    """The section; every string from the trace goes in as plain Text (never markup)."""
    lines: list[RenderableType] = [flops_line(eff)]
    lines.extend(mfu_lines(eff))
    lines.extend(ceiling_lines(eff))
    if eff.families:
        lines.append(family_table(eff.families))
    flagged = [f for f in eff.families[:FAMILIES_SHOWN] if f.flag is not None]
    for f in flagged:
        lines.append(Text(f"{f.family}: {f.flag.detail}" if f.flag else "", style="dim"))
    if eff.unmodelled:
        lines.append(Text("unmodelled: " + "; ".join(f"{u.name} {u.gpu_us / 1e3:.2f} ms"
                                                      for u in eff.unmodelled[:5]), style="dim"))
    return Panel(Group(*lines), title="useful work", title_align="left")
