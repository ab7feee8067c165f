"""The gate's terminal table: metric, baseline, candidate, change, threshold, p, verdict, and why."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuscope.console import SafeConsole
from gpuscope.format import printable_all
from gpuscope.gate import text
from gpuscope.gate.result import GateResult

TABLE_WIDTH = 110
STYLES = {"pass": "green", "regression": "bold red", "improvement": "cyan", "weak": "yellow", "unknown": "dim"}


def render(result: GateResult, console: Console) -> None:
    """The table and its explanations. Run names, reasons and recommendations may quote a trace or a baseline
    file: every string of the result is made ``printable`` and goes in as Text, never as markup."""
    # A CI log is not a terminal and rich would squeeze the table into 80 columns there: give it room.
    if not console.is_terminal and console.width < TABLE_WIDTH:
        console = SafeConsole(file=console.file, width=TABLE_WIDTH, soft_wrap=False)
    result = printable_all(result)
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("metric", "baseline", "candidate", "change", "threshold", "p", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right", no_wrap=True)
    for m in result.metrics:
        table.add_row(Text(m.title), Text(text.value(m, m.baseline)), Text(text.value(m, m.candidate)),
                      text.change(m), text.threshold(m), text.p_value(m), Text(text.status(m), STYLES[m.status]))
    console.print(Text.assemble(("gpuscope gate", "bold"), f": {result.candidate} against {result.baseline} "
                                f"({result.candidate_steps} vs {result.baseline_steps} steady steps, "
                                f"alpha {result.alpha:g})"))
    console.print(table)
    for m in result.metrics:
        if m.status not in ("pass", "unknown") or m.fails:
            console.print(Text.assemble("  ", (m.title, STYLES[m.status]), f": {m.reason}"), soft_wrap=True)
        for rec in m.recommendations[1:3]:
            console.print(Text(f"    also: {rec}"), soft_wrap=True)
    for note in result.notes:
        console.print(Text(f"  {note}", style="dim"))
    failed = result.failures
    if failed:
        console.print(Text.assemble(("FAIL", "bold red"), f": {len(failed)} regression(s): "
                                    + ", ".join(m.title.lower() for m in failed)))
    else:
        console.print(Text.assemble(("PASS", "bold green"), ": no regression"))
