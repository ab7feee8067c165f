"""The gate's terminal table: metric, baseline, candidate, change, threshold, p, verdict; what each metric is, and why.

Run names, file paths, reasons and recommendation text come from traces, baseline files and command lines: every
string of the result is made ``printable`` first and goes in as ``Text``, never as markup.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuscope.console import SafeConsole
from gpuscope.format import printable_all
from gpuscope.gate import text
from gpuscope.gate.result import GateResult, MetricResult

TABLE_WIDTH = 110
STYLES = {"pass": "green", "regression": "bold red", "improvement": "cyan", "weak": "yellow", "unknown": "dim"}


def render(result: GateResult, console: Console) -> None:
    # A CI log is not a terminal and rich would squeeze the table into 80 columns there: give it room.
    if not console.is_terminal and console.width < TABLE_WIDTH:
        console = SafeConsole(file=console.file, width=TABLE_WIDTH, soft_wrap=False)
    result = printable_all(result)
    console.print(Text.assemble(("gpuscope gate", "bold"), f": {result.candidate} against {result.baseline} "
                                f"({result.candidate_steps} vs {result.baseline_steps} steady steps, "
                                f"alpha {result.alpha:g})"), soft_wrap=True)
    if not result.comparable:
        console.print(Text.assemble(("The runs are not comparable", "bold red"), ": no metric was compared."))
    for line in text.mismatch_lines(result):
        console.print(Text.assemble("  ", (line, "yellow" if result.comparable else "red")), soft_wrap=True)
    for note in result.notes:
        console.print(Text.assemble("  ", (note, "dim")), soft_wrap=True)
    if result.metrics:
        _table(result, console)
    word, rest = text.verdict_line(result).split(":", 1)
    console.print(Text.assemble((word, f"bold {'green' if result.passed else 'red'}"), f":{rest}"), soft_wrap=True)
    explained = text.explanation_lines(result)
    if explained:
        console.print(Text.assemble(("What changed", "bold"), " (gpuscope diff):"))
    for line in explained:
        console.print(Text.assemble("  ", line), soft_wrap=True)


def _table(result: GateResult, console: Console) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("metric", "baseline", "candidate", "change", "threshold", "p", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right", overflow="fold")
    for m in result.metrics:
        table.add_row(Text(m.title), Text(text.value(m, m.baseline)), Text(text.value(m, m.candidate)),
                      text.change(m), text.threshold(m), text.p_value(m), Text(text.status(m), _style(m)))
    console.print(table)
    for m in result.metrics:
        if m.status not in ("pass", "unknown") or m.fails:
            console.print(Text.assemble("  ", (m.title, _style(m)), f": {m.reason}"), soft_wrap=True)
        for rec in m.recommendations[1:3]:
            console.print(Text(f"    also: {rec}"), soft_wrap=True)
    width = max(len(m.title) for m in result.metrics)
    console.print(Text.assemble("  ", ("measured as:", "dim")))
    for m in result.metrics:
        console.print(Text.assemble("  ", (f"{m.title:<{width}}  {m.definition}", "dim")), soft_wrap=True)


def _style(m: MetricResult) -> str:
    return STYLES["regression"] if m.fails else STYLES[m.status]
