"""The terminal's panel for the ranks side by side: the stragglers with their cause and price, and how the
collectives were matched (``Report.stragglers``, ``Report.arrivals``)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.format import ms, pct, usd
from gpuscope.model.across import Arrivals
from gpuscope.model.report import Report

MATCHED_BY = {"seq": "by process group and sequence number", "order": "by order within each step, group, stream and op"}
CLOCKS = {"shared": "one host: the ranks share its clock",
          "estimated": "clock offsets estimated from the collectives' ends"}
WHERE = {"gpu": "NCCL/RCCL kernels", "host": "gloo ops on the CPU"}


def matching_line(a: Arrivals, ranks: int) -> str:
    """How the ranks' collectives were matched, in one line."""
    return (f"{a.matched} collectives ({WHERE[a.where]}) matched across {ranks} ranks {MATCHED_BY[a.matched_by]}; "
            f"{CLOCKS[a.clock]} (ends agree within {ms(a.end_spread_us)}); arrival skew median "
            f"{ms(a.skew_median_us)}, max {ms(a.skew_max_us)}")


def panel(report: Report) -> RenderableType | None:
    """The panel, or None when no collective was matched across ranks."""
    a = report.arrivals
    if a is None:
        return None
    parts: list[RenderableType] = [Text(matching_line(a, len(a.ranks)), style="dim")]
    if report.stragglers:
        steps = max(facts_of(report).steady_steps, 1)
        for s in report.stragglers:
            per_1k = usd(s.usd / steps * 1000) if s.usd is not None else "n/a"
            parts.append(Text.assemble(
                (f"rank {s.rank}", "bold"), f": the others wait {ms(s.wait_caused_us)} per step for it "
                f"({pct(s.score, 0)} of their step), last at {s.last_in} of {s.collectives} collectives; cost "
                f"{usd(s.usd)} this run, {per_1k} per 1,000 steps"))
            parts.append(Text(f"   cause: {s.cause}", style="dim"))
    else:
        parts.append(Text("No straggler: " + a.threshold + "; no rank does.", style="dim"))
    late = sorted(a.ranks, key=lambda r: -r.late_mean_us)[:8]
    parts.append(Text("arrival after the first rank, mean: " + " · ".join(
        f"rank {r.rank} {ms(r.late_mean_us)} (last {pct(r.last_share, 0)})" for r in late), style="dim"))
    return Panel(Group(*parts), title="Stragglers", border_style="red" if report.stragglers else "dim")
