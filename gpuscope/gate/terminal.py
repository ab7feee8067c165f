"""The gate's terminal table: metric, baseline, candidate, change, threshold, p, verdict, and why."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from gpuscope.gate import text
from gpuscope.gate.result import GateResult

TABLE_WIDTH = 110
STYLES = {"pass": "green", "regression": "bold red", "improvement": "cyan", "weak": "yellow", "unknown": "dim"}


def render(result: GateResult, console: Console) -> None:
    # A CI log is not a terminal and rich would squeeze the table into 80 columns there: give it room.
    if not console.is_terminal and console.width < TABLE_WIDTH:
        console = Console(file=console.file, width=TABLE_WIDTH, highlight=False, soft_wrap=False)
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("metric", "baseline", "candidate", "change", "threshold", "p", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right", no_wrap=True)
    for m in result.metrics:
        style = STYLES[m.status]
        table.add_row(m.title, text.value(m, m.baseline), text.value(m, m.candidate), text.change(m),
                      text.threshold(m), text.p_value(m), f"[{style}]{text.status(m)}[/{style}]")
    console.print(f"[bold]gpuscope gate[/bold]: {result.candidate} against {result.baseline} "
                  f"({result.candidate_steps} vs {result.baseline_steps} steady steps, alpha {result.alpha:g})")
    console.print(table)
    for m in result.metrics:
        if m.status not in ("pass", "unknown") or m.fails:
            console.print(f"  [{STYLES[m.status]}]{m.title}[/]: {m.reason}", soft_wrap=True)
        for rec in m.recommendations[1:3]:
            console.print(f"    also: {rec}", soft_wrap=True)
    for note in result.notes:
        console.print(f"  [dim]{note}[/dim]")
    failed = result.failures
    if failed:
        console.print(f"[bold red]FAIL[/bold red]: {len(failed)} regression(s): "
                      + ", ".join(m.title.lower() for m in failed))
    else:
        console.print("[bold green]PASS[/bold green]: no regression")
