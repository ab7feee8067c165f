"""The report's "What changed" section (``gpuscope report --compare``): the waterfall from the earlier run's step
time to this run's, the parts that add up to the change, the kernels and set-up that changed, and the price.

Every string that comes from a trace or a run (names of runs, kernels, operators, set-up values) is escaped."""

from __future__ import annotations

from markupsafe import Markup

from gpuscope import figures
from gpuscope.format import ms, pct
from gpuscope.model.diff import Diff, NameChange
from gpuscope.reports.diff import NOISE_WORDS, caveat_lines, headline, per_1k_steps, signed_ms, signed_usd
from gpuscope.reports.html_blocks import Cell, Charts, html, join, table

NAMES_SHOWN = 8


def section(diff: Diff, charts: Charts) -> Markup:
    """The section's HTML."""
    out = [html('<h2 id="what-changed">What changed: {} → {}</h2>', diff.baseline.name, diff.candidate.name),
           *(html('<p class="warning">{}</p>', line) for line in caveat_lines(diff)),
           html('<p class="headline" id="diff-headline">{}</p>', headline(diff)),
           charts.block("waterfall", figures.waterfall(diff),
                        caption="Each bar is one part's change of the step time; the parts add up to the change.")]
    if diff.parts:
        out.append(_parts(diff))
    for title, rows, ident in (("Kernels", diff.kernels, "diff-kernels"), ("Operators", diff.operators,
                                                                             "diff-operators")):
        if rows:
            out.append(html("<h3>{} whose time per step changed most</h3>", title) + _names(rows[:NAMES_SHOWN], ident))
    out += [_setup(diff), _price(diff)]
    out += [html('<p class="dim">{}</p>', n) for n in diff.notes]
    return html('<section class="diff" id="diff">{}</section>', join(out))


def _parts(diff: Diff) -> Markup:
    rows = [[p.label, ms(p.baseline_us), ms(p.candidate_us), signed_ms(p.change_us),
             "n/a" if p.share_of_change is None else pct(p.share_of_change, 0), NOISE_WORDS[p.significant]]
            for p in diff.parts if p.baseline_us or p.candidate_us]
    return (html("<h3>The parts of the change ({})</h3>", signed_ms(diff.change_us))
            + table(["part", "before", "after", "change", "of the change", "noise"], rows, numeric={1, 2, 3, 4},
                    table_id="diff-parts"))


def _names(rows: tuple[NameChange, ...], ident: str) -> Markup:
    body = [[k.name, k.match, f"{k.baseline_count:.3g} → {k.candidate_count:.3g}",
             ms(k.baseline_us), ms(k.candidate_us), signed_ms(k.change_us)] for k in rows]
    return table(["name", "match", "calls per step", "before", "after", "change"], body, numeric={2, 3, 4, 5},
                 table_id=ident)


def _setup(diff: Diff) -> Markup:
    if not diff.setup_changes:
        unknown = [s.label for s in diff.setup if s.changed is None]
        tail = f" (not stated by both runs: {', '.join(unknown)})" if unknown else ""
        return html('<p id="diff-setup">Set-up: nothing either run states changed{}.</p>', tail)
    rows: list[list[Cell]] = [[s.label, s.baseline or "n/a", s.candidate or "n/a"] for s in diff.setup_changes]
    return Markup("<h3>Set-up changes</h3>") + table(["", "before", "after"], rows, table_id="diff-setup")


def _price(diff: Diff) -> Markup:
    p = diff.price
    month = (f"{signed_usd(p.usd_per_month)} a month: {p.assumption}" if p.usd_per_month is not None
             else "per month n/a (no price or no step time)")
    job = f"; {signed_usd(p.usd_per_job)} over the job ({p.job_basis})" if p.usd_per_job is not None else ""
    return html('<p id="diff-price">Price of the change: {}{}; {}.</p>', per_1k_steps(diff), job, month)
