"""Page one of the HTML report: what a manager reads. The verdict, GPU busy, the cost and what of it
was wasted (by cause), the top three changes with their savings, and, for a before/after report, the deltas."""

from __future__ import annotations

from dataclasses import fields

from gpuscope import figures
from gpuscope.figures.summary import gpu_busy, gpu_util
from gpuscope.format import pct, saving_text, usd, workload_line
from gpuscope.model.report import CostReport, Report
from gpuscope.reports.html_assets import Charts, esc

TOP_RECOMMENDATIONS = 3
_CHANGE_CLASS = {True: "better", False: "worse", None: ""}
WASTE_LABELS = {"idle": "GPU idle", "data_loading": "waiting for input (data loading)",
                "host_overhead": "host overhead (launches, syncs, Python)", "communication": "waiting on communication",
                "memory": "memory-bound (copies, bandwidth)", "unattributed": "not busy, cause not measured"}


def table(head: list[str], rows: list[list[str]], *, numeric: set[int] | None = None, table_id: str = "") -> str:
    """A grid table of already escaped cells; ``numeric`` column indices align right."""
    numeric = numeric or set()

    def cells(values: list[str], tag: str) -> str:
        return "".join(f'<{tag} class="num">{v}</{tag}>' if i in numeric else f"<{tag}>{v}</{tag}>"
                       for i, v in enumerate(values))

    body = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in rows)
    ident = f' id="{table_id}"' if table_id else ""
    return f'<table class="grid"{ident}><thead><tr>{cells(head, "th")}</tr></thead><tbody>{body}</tbody></table>'


def summary(report: Report, charts: Charts, *, before: Report | None = None) -> str:
    """Page one's HTML."""
    parts = [_verdict(report), _kpis(report), _waste(report.cost, charts), _top_recommendations(report)]
    if before is not None:
        parts.append(_deltas(before, report))
    return '<section class="summary" id="summary">' + "".join(parts) + "</section>"


def _verdict(report: Report) -> str:
    v = report.verdict
    workload = workload_line(report.ranks)
    kind = f'<p class="dim" id="workload">workload: {esc(workload)}</p>' if workload else ""
    if v.primary is None:
        return ('<h2>Verdict</h2><p class="verdict" id="verdict">'
                f"{esc(v.summary or 'No verdict: not enough evidence in this run.')}</p>{kind}")
    head = (f'<p class="headline"><strong id="verdict-primary">{esc(v.primary.replace("_", " "))}</strong>'
            f" · resource: {esc(v.resource)} · confidence {pct(v.confidence, 0)}</p>")
    also = (f'<p class="dim">also holding it back: {esc(", ".join(s.replace("_", " ") for s in v.secondary))}</p>'
            if v.secondary else "")
    return f'<h2>Verdict</h2>{head}<p class="verdict" id="verdict">{esc(v.summary)}</p>{also}{kind}'


def _kpi(label: str, value: str, sub: str = "", kpi_id: str = "") -> str:
    ident = f' id="{kpi_id}"' if kpi_id else ""
    return (f'<div class="kpi"{ident}><div class="label">{esc(label)}</div><div class="value">{esc(value)}</div>'
            f'<div class="sub">{esc(sub)}</div></div>')


def _kpis(report: Report) -> str:
    tiles = []
    busy, util = gpu_busy(report), gpu_util(report)
    if busy is not None or util is None:
        ranks = len(report.ranks)
        tiles.append(_kpi("GPU busy", pct(busy), f"mean of {ranks} rank{'s' if ranks != 1 else ''} (trace)"
                          if ranks else "no profiler trace", "kpi-busy"))
    if util is not None:
        tiles.append(_kpi("GPU utilization", pct(util), "sampled (NVML), mean over GPUs", "kpi-util"))
    c = report.cost
    if c is not None:
        gpus = f" on {c.gpu_count} GPU{'s' if c.gpu_count != 1 else ''}" if c.gpu_count else ""
        tiles.append(_kpi("Total cost", usd(c.total_usd), f"{c.gpu_hours:.4g} GPU-h{gpus}", "kpi-cost"))
        share = c.wasted_usd / c.total_usd if c.wasted_usd is not None and c.total_usd else None
        tiles.append(_kpi("Wasted", usd(c.wasted_usd), f"{pct(share)} of the cost", "kpi-wasted"))
        if c.projected_usd is not None:
            basis = {"job_hours": "--job-hours", "job_steps": "--job-steps"}.get(c.projection_basis or "", "")
            tiles.append(_kpi("Whole job (projected)", usd(c.projected_usd),
                              f"of which wasted {usd(c.projected_wasted_usd)}" + (f" ({basis})" if basis else ""),
                              "kpi-projected"))
    else:
        tiles.append(_kpi("Total cost", "n/a", "no GPU-hours or price known", "kpi-cost"))
    return '<div class="kpis">' + "".join(tiles) + "</div>"


def _waste(c: CostReport | None, charts: Charts) -> str:
    if c is None or c.wasted_usd is None:
        return charts.block("waste", figures.waste_breakdown(c))
    total = c.total_usd or 0.0
    scale = c.projected_usd / total if c.projected_usd is not None and total else None
    rows = []
    for f in fields(c.waste_by_cause_usd):
        value = getattr(c.waste_by_cause_usd, f.name)
        if not value:
            continue
        label = WASTE_LABELS.get(f.name, f.name.replace("_", " "))
        row = [esc(label), usd(value), pct(value / total if total else None)]
        if scale is not None:
            row.append(usd(value * scale))
        rows.append(row)
    head = ["cause", "this run", "share of the cost"] + (["whole job"] if scale is not None else [])
    price = (f"at {usd(c.usd_per_gpu_hour)}/GPU-h" if c.usd_per_gpu_hour is not None else "no price") + (
        f", {c.price_source}" if c.price_source else "")
    note = f'<p class="warning">{esc(c.note)}</p>' if c.note else ""
    grid = table(head, rows, numeric={1, 2, 3}, table_id="waste") if rows else ""
    return (f"<h3>Wasted dollars by cause</h3><p class=\"dim\">{esc(price)}</p>{note}{grid}"
            + charts.block("waste", figures.waste_breakdown(c)))


def _top_recommendations(report: Report) -> str:
    recs = report.recommendations[:TOP_RECOMMENDATIONS]
    if not recs:
        return '<h3>What to change first</h3><p class="absent">No change to recommend from this run.</p>'
    items = "".join(f'<li><strong class="rec-title">{esc(r.title)}</strong> · '
                    f'<span class="saving">{esc(saving_text(r, report.cost))}</span><p>{esc(r.detail)}</p></li>'
                    for r in recs)
    more = len(report.recommendations) - len(recs)
    tail = f'<p class="dim">{more} more under "Every recommendation".</p>' if more > 0 else ""
    return f'<h3>What to change first</h3><ol class="recs" id="top-recommendations">{items}</ol>{tail}'


def _deltas(before: Report, after: Report) -> str:
    deltas = figures.compare(before, after)
    rows = [[esc(d.label), esc(d.a), esc(d.b),
             f'<span class="{_CHANGE_CLASS[d.better]}">{esc(d.change)}</span>']
            for d in deltas]
    names = (f"before: {before.run.name or before.run.id} ({before.run.id}) · "
             f"after: {after.run.name or after.run.id} ({after.run.id})")
    return (f'<h3>Before and after</h3><p class="dim">{esc(names)}</p>'
            + table(["", "before", "after", "change"], rows, numeric={1, 2, 3}, table_id="deltas"))
