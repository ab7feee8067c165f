"""The HTML report's useful-work section: MFU with the peak it is measured against and the peak's source (or "n/a"
with the reason), the roofline chart the dashboard draws, and each kernel family against the roofline."""

from __future__ import annotations

from markupsafe import Markup

from gpuscope import figures
from gpuscope.figures import EfficiencyCard
from gpuscope.format import flag_text, pct, share_or_flag
from gpuscope.model.report import Report
from gpuscope.reports.html_blocks import Cell, Charts, html, join, table

FAMILIES_SHOWN = 12
ABOVE_SHOWN = 5


def efficiency(report: Report, charts: Charts) -> Markup:
    """The section; nothing for a run without traces' work (the chart is listed among the absent ones)."""
    eff = report.efficiency
    if eff is None:  # a live run without a trace, or a report saved before efficiency existed
        return Markup()
    card = figures.efficiency_card(eff)
    out = [Markup('<h2 id="useful-work">Useful work: MFU and the roofline</h2>')]
    if isinstance(card, EfficiencyCard):
        out.append(table(["figure", "value"], [list(row) for row in card.rows], table_id="mfu-card"))
        if card.note:
            out.append(html('<p class="dim" id="mfu-note">{}</p>', card.note))
    out.append(charts.block("roofline", figures.roofline(eff),
                            "Each kernel family's arithmetic intensity against the FLOP/s it achieved, per GPU over "
                            "the steady steps, under the GPU's memory and compute ceilings (log-log)."))
    rows: list[list[Cell]] = [[f.family, f"{f.gpu_us / 1e3:,.2f}", _num(f.achieved_tflops, ",.2f"),
                               _num(f.achieved_tb_s, ",.3f"), _num(f.intensity, ",.1f"), f.bound or "n/a",
                               share_or_flag(f.roofline_share, f.flag)] for f in eff.families[:FAMILIES_SHOWN]]
    if rows:
        out.append(table(["kernel family", "GPU ms/step", "TFLOP/s", "TB/s", "FLOP/byte", "bound", "% of roofline"],
                         rows, numeric={1, 2, 3, 4, 6}, table_id="roofline-families"))
    causes = [f"{f.family}: {f.flag.detail}" for f in eff.families[:FAMILIES_SHOWN] if f.flag is not None]
    causes += [f"{flag_text(a.flag)}, {'kept in' if a.in_mfu else 'left out of'} MFU: {a.flag.detail}"
               for a in eff.above_ceiling[:ABOVE_SHOWN]]
    for i, cause in enumerate(causes):
        out.append(html('<p class="dim" id="ceiling-{}">{}</p>', i, cause))
    return join(out)


def mfu_line(report: Report) -> str | None:
    """Page one's MFU, under GPU busy: "MFU 28.2% of 15.7 TFLOP/s fp32 (V100 SXM2 32GB)", or "MFU n/a" with the
    section that says why; None for a run without traces' work."""
    eff = report.efficiency
    if eff is None:
        return None
    if eff.mfu_flag is not None:
        return f"MFU {flag_text(eff.mfu_flag)} (Useful work says why)"
    if eff.mfu is None or eff.peak_flops is None:
        return "MFU n/a (Useful work says why)"
    return f"MFU {pct(eff.mfu)} of {eff.peak_flops / 1e12:,.4g} TFLOP/s {eff.peak_dtype} ({eff.gpu_model})"


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)



