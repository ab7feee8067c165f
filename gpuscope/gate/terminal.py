"""The gate's terminal table: metric, baseline, candidate, change, threshold, p, verdict; what each metric is, and why.

Run names, file paths and recommendation text come from traces and command lines: printed escaped, never as markup.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpuscope.gate import text
from gpuscope.gate.result import GateResult

TABLE_WIDTH = 110
STYLES = {"pass": "green", "regression": "bold red", "improvement": "cyan", "weak": "yellow", "unknown": "dim"}


def render(result: GateResult, console: Console) -> None:
    # A CI log is not a terminal and rich would squeeze the table into 80 columns there: give it room.
    if not console.is_terminal and console.width < TABLE_WIDTH:
        console = Console(file=console.file, width=TABLE_WIDTH, highlight=False, soft_wrap=False)
    console.print(f"[bold]gpuscope gate[/bold]: {escape(result.candidate)} against {escape(result.baseline)} "
                  f"({result.candidate_steps} vs {result.baseline_steps} steady steps, alpha {result.alpha:g})",
                  soft_wrap=True)
    if not result.comparable:
        console.print("[bold red]The runs are not comparable[/bold red]: no metric was compared.")
    for line in text.mismatch_lines(result):
        console.print(f"  [{'yellow' if result.comparable else 'red'}]{escape(line)}[/]", soft_wrap=True)
    for note in result.notes:
        console.print(f"  [dim]{escape(note)}[/dim]", soft_wrap=True)
    if result.metrics:
        _table(result, console)
    verdict = text.verdict_line(result)
    word, rest = verdict.split(":", 1)
    console.print(f"[bold {'green' if result.passed else 'red'}]{word}[/]:{escape(rest)}", soft_wrap=True)


def _table(result: GateResult, console: Console) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("metric", "baseline", "candidate", "change", "threshold", "p", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right", no_wrap=True)
    for m in result.metrics:
        style = STYLES[m.status]
        table.add_row(m.title, escape(text.value(m, m.baseline)), escape(text.value(m, m.candidate)),
                      text.change(m), text.threshold(m), text.p_value(m), f"[{style}]{text.status(m)}[/{style}]")
    console.print(table)
    for m in result.metrics:
        if m.status not in ("pass", "unknown") or m.fails:
            console.print(f"  [{STYLES[m.status]}]{m.title}[/]: {escape(m.reason)}", soft_wrap=True)
        for rec in m.recommendations[1:3]:
            console.print(f"    also: {escape(rec)}", soft_wrap=True)
    width = max(len(m.title) for m in result.metrics)
    console.print("  [dim]measured as:[/dim]")
    for m in result.metrics:
        console.print(f"  [dim]{m.title:<{width}}  {m.definition}[/dim]", soft_wrap=True)
