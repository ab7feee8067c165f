"""The terminal view of a HangReport: the stuck collective, who never joined, and where every rank stands."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuscope.analyzers.across.hang import p2p_words
from gpuscope.console import SafeConsole
from gpuscope.format import printable_all
from gpuscope.model.hang import HangReport

RANKS_SHOWN = 64


def render(report: HangReport, console: Console | None = None) -> None:
    console = console or SafeConsole()
    for part in sections(report):
        console.print(part)


def sections(report: HangReport) -> list[RenderableType]:
    report = printable_all(report)
    forms = " and ".join(report.forms)
    out: list[RenderableType] = [Text.assemble(("gpuscope hang ", "bold"),
                                               f"{len(report.dumps)} {forms} dumps")]
    h = report.hung_collective
    head: list[RenderableType] = [Text(report.summary)]
    if h is not None:
        head.append(Text.assemble(("hung collective ", "bold"),
                                  f"{h.op or 'collective'} #{h.seq} of process group {h.process_group}"))
        head.append(Text.assemble(("never joined ", "bold"), _list(report.missing_ranks),
                                  ("  waiting ", "bold"), _list(report.waiting_ranks),
                                  *((("  no dump ", "bold"), _list(report.undumped_ranks))
                                    if report.undumped_ranks else ())))
    out.append(Panel(Group(*head), title="Hang", border_style="red" if h is not None else "green"))
    if report.ranks:
        table = Table(title="Ranks in its process group", header_style="bold", box=None)
        for col in ("rank", "joined", "state", "last completed", "last enqueued"):
            table.add_column(col, justify="right" if col == "rank" else "left")
        for s in report.ranks[:RANKS_SHOWN]:
            done = f"{s.last_completed_op or 'collective'} #{s.last_completed_seq}" if s.last_completed_seq else "none"
            table.add_row(str(s.rank), "yes" if s.entered else "no", s.state or "-", done,
                          f"#{s.last_enqueued_seq}" if s.last_enqueued_seq else "none")
        out.append(table)
        if len(report.ranks) > RANKS_SHOWN:
            out.append(Text(f"... and {len(report.ranks) - RANKS_SHOWN} more ranks (--json lists all)", style="dim"))
    for u in report.unmatched_p2p:
        out.append(Text(f"point-to-point: {p2p_words(u)} ({u.state})", style="yellow"))
    for m in report.mismatches:
        seen = "; ".join(f"{v} on ranks {', '.join(map(str, r))}" for v, r in m.values.items())
        out.append(Text(f"mismatch: collective #{m.seq} of process group {m.process_group}: "
                        f"{m.field.replace('_', ' ')} {seen}", style="yellow"))
    return out


def _list(ranks: tuple[int, ...]) -> str:
    return ", ".join(map(str, ranks)) if ranks else "none"
