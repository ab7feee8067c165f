"""The report's "What changed" section (``gpuscope report --compare``): the waterfall from the earlier run's step
time to this run's, the parts that add up to the change, the kernels and set-up that changed, and the price.

Every string that comes from a trace or a run (names of runs, kernels, operators, set-up values) is escaped."""

from __future__ import annotations

from gpuscope import figures
from gpuscope.format import ms, pct
from gpuscope.model.diff import Diff, NameChange
from gpuscope.reports.diff import NOISE_WORDS, headline, per_1k_steps, signed_ms, signed_usd
from gpuscope.reports.html_assets import Charts, esc
from gpuscope.reports.html_summary import table

NAMES_SHOWN = 8


def section(diff: Diff, charts: Charts) -> str:
    """The section's HTML."""
    out = [f'<h2 id="what-changed">What changed: {esc(diff.baseline.name)} → {esc(diff.candidate.name)}</h2>',
           f'<p class="headline" id="diff-headline">{esc(headline(diff))}</p>',
           charts.block("waterfall", figures.waterfall(diff),
                        caption="Each bar is one part's change of the step time; the parts add up to the change.")]
    if diff.parts:
        out.append(_parts(diff))
    for title, rows, ident in (("Kernels", diff.kernels, "diff-kernels"), ("Operators", diff.operators,
                                                                             "diff-operators")):
        if rows:
            out.append(f"<h3>{title} whose time per step changed most</h3>" + _names(rows[:NAMES_SHOWN], ident))
    out += [_setup(diff), _price(diff)]
    out += [f'<p class="dim">{esc(n)}</p>' for n in diff.notes]
    return '<section class="diff" id="diff">' + "".join(out) + "</section>"


def _parts(diff: Diff) -> str:
    rows = [[esc(p.label), esc(ms(p.baseline_us)), esc(ms(p.candidate_us)), esc(signed_ms(p.change_us)),
             esc("n/a" if p.share_of_change is None else pct(p.share_of_change, 0)), esc(NOISE_WORDS[p.significant])]
            for p in diff.parts if p.baseline_us or p.candidate_us]
    return (f"<h3>The parts of the change ({esc(signed_ms(diff.change_us))})</h3>"
            + table(["part", "before", "after", "change", "of the change", "noise"], rows, numeric={1, 2, 3, 4},
                    table_id="diff-parts"))


def _names(rows: tuple[NameChange, ...], ident: str) -> str:
    body = [[esc(k.name), esc(k.match), esc(f"{k.baseline_count:.3g} → {k.candidate_count:.3g}"),
             esc(ms(k.baseline_us)), esc(ms(k.candidate_us)), esc(signed_ms(k.change_us))] for k in rows]
    return table(["name", "match", "calls per step", "before", "after", "change"], body, numeric={2, 3, 4, 5},
                 table_id=ident)


def _setup(diff: Diff) -> str:
    if not diff.setup_changes:
        unknown = [s.label for s in diff.setup if s.changed is None]
        tail = f" (not stated by both runs: {', '.join(unknown)})" if unknown else ""
        return f'<p id="diff-setup">Set-up: nothing either run states changed{esc(tail)}.</p>'
    rows = [[esc(s.label), esc(s.baseline), esc(s.candidate)] for s in diff.setup_changes]
    return "<h3>Set-up changes</h3>" + table(["", "before", "after"], rows, table_id="diff-setup")


def _price(diff: Diff) -> str:
    p = diff.price
    month = (f"{signed_usd(p.usd_per_month)} a month: {p.assumption}" if p.usd_per_month is not None
             else "per month n/a (no price or no step time)")
    job = f"; {signed_usd(p.usd_per_job)} over the job ({p.job_basis})" if p.usd_per_job is not None else ""
    return f'<p id="diff-price">Price of the change: {esc(per_1k_steps(diff))}{esc(job)}; {esc(month)}.</p>'
