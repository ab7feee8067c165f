"""The operator table in the terminal (rich): per rank, time per operator with the kernels it launched.

Operator and kernel names come from the trace: they go in as ``Text`` (never read as markup), made
``format.printable`` (no control character reaches the terminal).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.text import Text

from gpuscope.analyzers.trace.ops import OpStat, OpTable
from gpuscope.format import ms, pct, printable

SORT_LABELS = {"gpu_self": "GPU self time", "gpu_total": "GPU total time", "cpu_self": "CPU self time",
               "cpu_total": "CPU total time", "calls": "calls", "name": "name"}
NAME_CHARS = 60
"""Operator and kernel names longer than this are shortened in the table (``--json`` has them whole)."""


def render_ops(tables: Sequence[OpTable], console: Console, *, sort: str, top: int | None, kernels: int) -> None:
    """Each rank's table: ``top`` operators (all when None), each with up to ``kernels`` of its kernels."""
    for table in tables:
        console.print(rank_view(table, sort=sort, top=top, kernels=kernels, width=console.width))
        console.print()


def rank_view(table: OpTable, *, sort: str, top: int | None, kernels: int, width: int = 80) -> RenderableType:
    """One rank's table, laid out for ``width`` columns: numbers in fixed columns on the right, each name in the
    room left of them, or on a line of its own above its numbers when it is longer."""
    shown = table.ops if top is None else table.ops[:top]
    name_width = max(width - NUMBERS_WIDTH, 12)
    lines = [_head(table), Text(" " * name_width + _numbers(HEADERS), style="bold")]
    for op in shown:
        lines += _op_lines(op, kernels, name_width, width)
    hidden = len(table.ops) - len(shown)
    note = f"sorted by {SORT_LABELS[sort]}"
    if hidden:
        note += f"; {hidden} more operators not shown (--top 0 shows all)"
    lines.append(Text(note + "; 'of steps' is GPU total time over the profiled step time.", style="dim"))
    return Group(*lines)


HEADERS = ("calls", "CPU self", "CPU total", "GPU self", "GPU total", "of steps")
_WIDTHS = (7, 10, 11, 10, 11, 10)
NUMBERS_WIDTH = sum(_WIDTHS)


def _numbers(cells: tuple[str, ...]) -> str:
    return "".join(c.rjust(w) for c, w in zip(cells, _WIDTHS))


def _head(table: OpTable) -> Text:
    if table.steps_us is None:
        steps = "no profiler steps"
    elif table.steps:
        steps = f"{table.steps} profiler step{'s' if table.steps != 1 else ''} ({ms(table.steps_us)})"
    else:
        steps = f"no profiler steps (shares of the {ms(table.steps_us)} window)"
    rows, row = ("annotated ranges (no operator recorded)", "range") if table.by_range else ("operators", "operator")
    outside = (f", {ms(table.no_operator_gpu_us)} of it launched outside any {row}"
               if table.no_operator_gpu_us >= 1 else "")
    return Text.assemble((f"Rank {table.rank}", "bold"),
                         f": {len(table.ops)} {rows}, {steps}; GPU work {ms(table.gpu_us)}{outside}")


def _op_lines(op: OpStat, kernels: int, name_width: int, width: int) -> list[Text]:
    numbers = _numbers((f"{op.calls:,}", ms(op.cpu_self_us), ms(op.cpu_total_us), ms(op.gpu_self_us),
                        ms(op.gpu_total_us), pct(op.gpu_share)))
    name = short(op.name, width)
    if len(name) <= name_width:
        lines = [Text(name.ljust(name_width) + numbers)]
    else:
        lines = [Text(name), Text(" " * name_width + numbers)]
    # A kernel has no CPU time: its name runs on over the calls and CPU columns, its calls after it ("x5").
    room = name_width + sum(_WIDTHS[:3])
    for kernel in op.kernels[:kernels]:
        calls = f" x{kernel.calls:,}"
        left = "  └ " + short(kernel.name, room - 4 - len(calls) - 1) + calls
        lines.append(Text(left.ljust(room) + ms(kernel.total_us).rjust(_WIDTHS[3]), style="dim"))
    if len(op.kernels) > kernels > 0:
        lines.append(Text(f"  └ {len(op.kernels) - kernels} more kernels", style="dim"))
    return lines


def short(name: str, width: int = NAME_CHARS) -> str:
    """A trace name made printable, shortened with an ellipsis past ``width`` characters."""
    name = printable(name)
    return name if len(name) <= width else name[: max(width - 1, 1)] + "…"
