"""`gpuscope ops` in the terminal, its useful-work side: the run's MFU (or why it is n/a) above the tables, and under
each rank's operator table its operators' FLOPs against the roofline and its kernel families.

Operator names come from the trace: they go in as ``Text``, made printable and shortened as in the operator table.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.text import Text

from gpuscope.analyzers.trace.ops import OpStat, OpTable
from gpuscope.format import flag_short, flag_text, pct
from gpuscope.model.efficiency import Efficiency
from gpuscope.reports.efficiency_view import ceiling_lines, family_table, flops_line, mfu_lines, num
from gpuscope.reports.ops import rank_view, short


def render_ops_with_work(tables: Sequence[OpTable], console: Console, *, sort: str, top: int | None,
                         kernels: int) -> None:
    """Each rank's operator table (``reports.ops``), then its operators' work and kernel families."""
    for table in tables:
        console.print(rank_view(table, sort=sort, top=top, kernels=kernels, width=console.width))
        console.print()
        console.print(rank_work(table, top=top, width=console.width))
        console.print()


def render_run_work(eff: Efficiency | None, console: Console) -> None:
    """The run's FLOPs per step, MFU line and the peak's source (``gpuscope analyze``'s, from the same report),
    and the work above the GPU's ceilings; a line saying why there is none for a run without traces' work."""
    if eff is None:
        console.print(Text("MFU n/a: no profiler trace work was counted", style="dim"))
    else:
        console.print(Group(flops_line(eff), *mfu_lines(eff), *ceiling_lines(eff)))
    console.print()


def rank_work(table: OpTable, *, top: int | None, width: int = 80) -> RenderableType:
    """The rank's operators with counted FLOPs, most FLOPs first (``top`` of them), and its kernel families, laid
    out for ``width`` columns as the operator table is; a line saying why when the rank has neither."""
    counted = sorted((o for o in table.ops if o.efficiency is not None),
                     key=lambda o: (-(o.efficiency.flops if o.efficiency else 0.0), o.name))
    if not counted and not table.families:
        return Text(f"Rank {table.rank}: no FLOPs counted (a trace recorded without record_shapes=True, or no "
                    "operator gpuscope can count)", style="dim")
    shown = counted if top is None else counted[:top]
    name_width = max(width - NUMBERS_WIDTH, 12)
    parts: list[RenderableType] = [
        Text(f"Rank {table.rank}: FLOPs of each operator over all its calls, against the roofline at its type",
             style="bold"),
        Text(" " * name_width + _numbers(HEADERS), style="bold")]
    for op in shown:
        parts += _op_lines(op, name_width, width)
    if len(counted) > len(shown):
        parts.append(Text(f"{len(counted) - len(shown)} more operators with FLOPs (--top 0 shows all)", style="dim"))
    rerun = [o for o in shown if o.efficiency is not None and o.efficiency.recomputed_flops > 0]
    if rerun:
        parts.append(Text("of which re-run for checkpointed activations (hardware FLOPs, not the model's): "
                          + "; ".join(f"{short(o.name, width)} {o.efficiency.recomputed_flops / 1e9:,.2f} GFLOP"
                                      for o in rerun if o.efficiency is not None), style="dim"))
    flagged = [o for o in shown if o.efficiency is not None and o.efficiency.flag is not None]
    for o in flagged:
        if o.efficiency is not None and o.efficiency.flag is not None:
            parts.append(Text(f"{short(o.name, width)} {flag_text(o.efficiency.flag)}: {o.efficiency.flag.detail}",
                              style="dim"))
    if table.families:
        parts.append(Text(f"Rank {table.rank}: kernel families over its steady steps, per step", style="bold"))
        parts.append(family_table(table.families))
    return Group(*parts)


HEADERS = ("calls", "GFLOP", "GPU ms", "TFLOP/s", "TB/s", "FLOP/B", "type", "roofline")
_WIDTHS = (7, 11, 9, 8, 7, 8, 6, 9)
NUMBERS_WIDTH = sum(_WIDTHS)


def _numbers(cells: tuple[str, ...]) -> str:
    return "".join(c.rjust(w) for c, w in zip(cells, _WIDTHS))


def _op_lines(op: OpStat, name_width: int, width: int) -> list[Text]:
    w = op.efficiency
    assert w is not None
    numbers = _numbers((f"{w.calls:,}", f"{w.flops / 1e9:,.2f}", f"{w.gpu_us / 1e3:.2f}", num(w.achieved_tflops, ".2f"),
                        num(w.achieved_tb_s, ".3f"), num(w.intensity, ".1f"), w.dtype or "n/a",
                        flag_short(w.flag) if w.flag is not None else pct(w.roofline_share)))
    name = short(op.name, width)
    if len(name) <= name_width:
        return [Text(name.ljust(name_width) + numbers)]
    return [Text(name), Text(" " * name_width + numbers)]
