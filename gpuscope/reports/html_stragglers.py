"""The HTML report's section on the ranks side by side: the stragglers with their cause and price, how the
collectives were matched, and the per-rank arrival chart."""

from __future__ import annotations

from markupsafe import Markup

from gpuscope import figures
from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.format import ms, pct, usd
from gpuscope.model.report import Report
from gpuscope.reports.html_blocks import Cell, Charts, html, table
from gpuscope.reports.stragglers import collective_name, consistency, matching_line


def section(report: Report, charts: Charts) -> Markup:
    """The section; empty when no collective was matched across ranks."""
    a = report.arrivals
    if a is None:
        return Markup()
    out = [Markup('<h2 id="stragglers">Stragglers</h2>'), html('<p class="dim">{}</p>', matching_line(a, len(a.ranks)))]
    if report.stragglers:
        steps = max(facts_of(report).steady_steps, 1)
        rows: list[list[Cell]] = [
            [str(s.rank), f"{ms(s.wait_caused_us)}/step", pct(s.score, 0), consistency(s),
             f"{s.last_in} of {s.collectives}", usd(s.usd), usd(s.usd / steps * 1000 if s.usd is not None else None),
             s.cause]
            for s in report.stragglers]
        out.append(table(["rank", "others wait", "of their step", "waited for", "last at", "cost (this run)",
                          "per 1,000 steps", "cause"], rows, numeric={0, 1, 2, 4, 5, 6}, table_id="stragglers-table"))
    else:
        out.append(html('<p id="no-straggler">No straggler: {}; no rank does.</p>', a.threshold))
    if a.worst:
        worst: list[list[Cell]] = [
            [collective_name(c), str(c.last_rank), ms(c.late_us), ms(c.wait_caused_us),
             ", ".join(f"{w.rank} ({ms(w.wait_us)})" for w in c.waits)
             + (f" ... ({c.waiting_ranks} in all)" if c.waiting_ranks > len(c.waits) else "")]
            for c in a.worst]
        out.append(table(["collective", "last rank", "late by", "the others wait (mean)", "ranks waiting"], worst,
                         numeric={1, 2, 3}, table_id="worst-waits-table"))
    out.append(charts.block("arrivals", figures.arrival_chart(report)))
    return Markup("").join(out)
