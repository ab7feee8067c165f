"""The terminal's panel for the ranks side by side: the stragglers with their cause and price, and how the
collectives were matched (``Report.stragglers``, ``Report.arrivals``)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.format import ms, pct, usd
from gpuscope.model.across import Arrivals, CollectiveArrival, StragglerRank
from gpuscope.model.report import Report

MATCHED_BY = {"seq": "by process group and sequence number", "order": "by order within each step, group, stream and op"}
CLOCKS = {"shared": "one host: the ranks share its clock",
          "estimated": "clock offsets estimated from the collectives' ends"}
WHERE = {"gpu": "NCCL/RCCL kernels", "host": "gloo ops on the CPU"}
WORST_LINES = 3
WAITING_NAMED = 8


def matching_line(a: Arrivals, ranks: int) -> str:
    """How the ranks' collectives were matched, in one line."""
    clock = f"{CLOCKS[a.clock]} ({a.clock_note})" if a.clock_note else CLOCKS[a.clock]
    return (f"{a.matched} collectives ({WHERE[a.where]}) matched across {ranks} ranks {MATCHED_BY[a.matched_by]}; "
            f"{clock} (ends agree within {ms(a.end_spread_us)}); arrival skew median "
            f"{ms(a.skew_median_us)}, max {ms(a.skew_max_us)}")


def collective_name(c: CollectiveArrival) -> str:
    """"all_reduce #6 of group 0", or by order "all_reduce #1 of step 4"."""
    number = f" #{c.nth}" if c.nth is not None else ""
    where = [f"group {c.group}"] if c.group else []
    if c.seq is None and c.step:
        where.append(f"step {c.step}")
    return f"{c.op}{number}" + (f" of {', '.join(where)}" if where else "")


def wait_line(c: CollectiveArrival) -> str:
    """Who made whom wait at one collective: "all_reduce #1 of step 4: rank 1 late 300 ms, ranks 0, 2, 3 wait
    (300 ms on average)"."""
    named = [str(w.rank) for w in c.waits[:WAITING_NAMED]]
    if c.waiting_ranks > len(named):
        named.append(f"... ({c.waiting_ranks} in all)")
    who = f"rank{'s' if c.waiting_ranks != 1 else ''} {', '.join(named)}"
    return (f"{collective_name(c)}: rank {c.last_rank} late {ms(c.late_us)}, {who} wait "
            f"({ms(c.wait_caused_us)} on average)")


def consistency(s: StragglerRank) -> str:
    """"in 7 of 7 steps": how often the others waited for it."""
    return f"in {s.consistent_in} of {s.consistency_units} {s.consistency_unit}s"


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
                f"({pct(s.score, 0)} of their step) {consistency(s)}, last at {s.last_in} of {s.collectives} "
                "collectives; cost "
                f"{usd(s.usd)} this run, {per_1k} per 1,000 steps"))
            parts.append(Text(f"   cause: {s.cause}", style="dim"))
    else:
        parts.append(Text("No straggler: " + a.threshold + "; no rank does.", style="dim"))
    for c in a.worst[:WORST_LINES]:
        parts.append(Text("longest wait: " + wait_line(c), style="dim"))
    late = sorted(a.ranks, key=lambda r: -r.late_mean_us)[:8]
    parts.append(Text("arrival after the first rank, mean: " + " · ".join(
        f"rank {r.rank} {ms(r.late_mean_us)} (last {pct(r.last_share, 0)})" for r in late), style="dim"))
    return Panel(Group(*parts), title="Stragglers", border_style="red" if report.stragglers else "dim")
