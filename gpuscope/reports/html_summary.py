"""Page one of the HTML report: what a manager reads. The verdict, GPU busy, the cost and what of it
was wasted (by cause), the top three changes with their savings, and, for a before/after report, the deltas."""

from __future__ import annotations

from dataclasses import fields

from markupsafe import Markup

from gpuscope import figures
from gpuscope.figures.summary import gpu_busy, gpu_util
from gpuscope.format import (
    JOB_LENGTH_HINT,
    gpu_time,
    hourly_usd,
    money_frame,
    pct,
    price_line,
    saving_text,
    shared_cost_line,
    usd,
    workload_line,
)
from gpuscope.model.cost import CostReport
from gpuscope.model.diagnosis import resource_word
from gpuscope.model.report import Report
from gpuscope.reports.html_blocks import Cell, Charts, html, join, table
from gpuscope.reports.html_efficiency import mfu_line

TOP_RECOMMENDATIONS = 3
_CHANGE_CLASS = {True: "better", False: "worse", None: ""}
WASTE_LABELS = {"idle": "GPU idle", "data_loading": "waiting for input (data loading)",
                "host_overhead": "host overhead (launches, syncs, Python)", "communication": "waiting on communication",
                "memory": "memory-bound (copies, bandwidth)", "unattributed": "not busy, cause not measured",
                "outlier_steps": "outlier steps (one-off slow steps, over the typical step)"}


def summary(report: Report, charts: Charts, *, before: Report | None = None) -> Markup:
    """Page one's HTML."""
    parts = [_verdict(report), _kpis(report), _waste(report.cost, charts), _top_recommendations(report)]
    if before is not None:
        parts.append(_deltas(before, report))
    return html('<section class="summary" id="summary">{}</section>', join(parts))


def _verdict(report: Report) -> Markup:
    v = report.verdict
    workload = workload_line(report.ranks)
    kind = html('<p class="dim" id="workload">workload: {}</p>', workload) if workload else ""
    if v.primary is None:
        return html('<h2>Verdict</h2><p class="verdict" id="verdict">{}</p>{}',
                    v.summary or "No verdict: not enough evidence in this run.", kind)
    head = html('<p class="headline"><strong id="verdict-primary">{}</strong> · resource: {} · confidence {}</p>',
                v.primary.replace("_", " "), resource_word(v), pct(v.confidence, 0))
    also = (html('<p class="dim">also holding it back: {}</p>', ", ".join(s.replace("_", " ") for s in v.secondary))
            if v.secondary else "")
    return html('<h2>Verdict</h2>{}<p class="verdict" id="verdict">{}</p>{}{}', head, v.summary, also, kind)


def _kpi(label: str, value: str, sub: str = "", kpi_id: str = "") -> Markup:
    ident = html(' id="{}"', kpi_id) if kpi_id else ""
    return html('<div class="kpi"{}><div class="label">{}</div><div class="value">{}</div><div class="sub">{}</div>'
                "</div>", ident, label, value, sub)


def _kpis(report: Report) -> Markup:
    if report.cpu_job:
        return html('<div class="kpis">{}</div>', _kpi("Cost", "n/a", "CPU only: no GPU time to price", "kpi-cost"))
    tiles = []
    busy, util = gpu_busy(report), gpu_util(report)
    mfu = mfu_line(report)
    if busy is not None or util is None:
        ranks = len(report.ranks)
        sub = f"mean of {ranks} rank{'s' if ranks != 1 else ''} (trace)" if ranks else "no profiler trace"
        tiles.append(_kpi("GPU busy", pct(busy), sub + (f"; {mfu}" if mfu else ""), "kpi-busy"))
    if util is not None:
        tiles.append(_kpi("GPU utilization", pct(util), "sampled (NVML), mean over GPUs", "kpi-util"))

    c = report.cost
    tiles.extend(_cost_kpis(c, trace=report.run.kind == "trace") if c is not None
                 else [_kpi("Total cost", "n/a", "no GPU-hours or price known", "kpi-cost")])
    return html('<div class="kpis">{}</div>', join(tiles))


def _cost_kpis(c: CostReport, *, trace: bool) -> list[Markup]:
    """The whole job first when its length is known, else the cost per hour of the run's GPUs (and how to give
    the job's length); then per 1,000 steps, the waste, and this run itself."""
    tiles = []
    share = c.wasted_usd / c.total_usd if c.wasted_usd is not None and c.total_usd else None
    if c.projected_usd is not None:
        basis = {"job_hours": "--job-hours", "job_steps": "--job-steps"}.get(c.projection_basis or "", "")
        tiles.append(_kpi("Whole job (projected)", usd(c.projected_usd),
                          f"of which wasted {usd(c.projected_wasted_usd)}" + (f" ({basis})" if basis else ""),
                          "kpi-projected"))
    hourly = hourly_usd(c)
    if hourly is not None:
        sub = "; ".join(part for part in (
            f"of which wasted {usd(hourly * share)}" if share is not None else "",
            f"per 1,000 steps {usd(c.per_1k_steps_usd)}" if c.per_1k_steps_usd is not None else "",
            JOB_LENGTH_HINT if trace and c.projected_usd is None else "") if part)
        tiles.append(_kpi("Per hour", usd(hourly), sub, "kpi-hourly"))
    tiles.append(_kpi("Wasted", pct(share), "of the cost", "kpi-wasted"))
    if c.held_usd is not None:
        tiles.append(_kpi("This job's share of a shared GPU", usd(c.own_usd),
                          f"of the GPU's {usd(c.held_usd)} while it held it", "kpi-own"))
    gpus = f" on {c.gpu_count} GPU{'s' if c.gpu_count != 1 else ''}" if c.gpu_count else ""
    tiles.append(_kpi("This run", usd(c.total_usd), f"{gpu_time(c.gpu_hours)}{gpus}", "kpi-cost"))
    return tiles


def _waste(c: CostReport | None, charts: Charts) -> Markup:
    if c is None:
        return charts.block("waste", figures.waste_breakdown(c))
    if c.wasted_usd is None:  # the price (and a shared GPU's split) still say what the cost is made of
        return _price(c) + charts.block("waste", figures.waste_breakdown(c))
    total = c.total_usd or 0.0
    frame = money_frame(c)
    rows: list[list[Cell]] = []
    for f in fields(c.waste_by_cause_usd):
        value = getattr(c.waste_by_cause_usd, f.name)
        if not value:
            continue
        label = WASTE_LABELS.get(f.name, f.name.replace("_", " "))
        rows.append([label, usd(value * frame.factor), pct(value / total if total else None)])
    head = ["cause", frame.label if frame.label != "on this run" else "this run", "share of the cost"]
    grid = table(head, rows, numeric={1, 2, 3}, table_id="waste") if rows else ""
    return Markup("<h3>Wasted dollars by cause</h3>") + _price(c) + grid + charts.block(
        "waste", figures.waste_breakdown(c))


def _price(c: CostReport) -> Markup:
    """The price line (a MIG slice's share of its GPU's), a shared GPU's split, and the cost's note."""
    price = price_line(c.usd_per_gpu_hour, c.price_source, share_basis=c.gpu_share_basis,
                       whole_usd_per_gpu_hour=c.whole_usd_per_gpu_hour)
    shared = (html('<p id="shared-gpu">{}</p>', shared_cost_line(c.own_usd, c.held_usd, c.own_basis,
                                                                  c.neighbours_usd))
              if c.held_usd is not None else "")
    note = html('<p class="warning">{}</p>', c.note) if c.note else ""
    return html('<p class="dim" id="price">{}</p>{}{}', price, shared, note)


def _top_recommendations(report: Report) -> Markup:
    recs = report.recommendations[:TOP_RECOMMENDATIONS]
    if not recs:
        return Markup('<h3>What to change first</h3><p class="absent">No change to recommend from this run.</p>')
    items = join(html('<li><strong class="rec-title">{}</strong> · <span class="saving">{}</span><p>{}</p></li>',
                      r.title, saving_text(r, report.cost), r.detail) for r in recs)
    more = len(report.recommendations) - len(recs)
    tail = html('<p class="dim">{} more under "Every recommendation".</p>', more) if more > 0 else ""
    return html('<h3>What to change first</h3><ol class="recs" id="top-recommendations">{}</ol>{}', items, tail)


def _deltas(before: Report, after: Report) -> Markup:
    deltas = figures.compare(before, after)
    rows: list[list[Cell]] = [[d.label, d.a, d.b, html('<span class="{}">{}</span>', _CHANGE_CLASS[d.better], d.change)]
                              for d in deltas]
    names = (f"before: {before.run.name or before.run.id} ({before.run.id}) · "
             f"after: {after.run.name or after.run.id} ({after.run.id})")
    return html('<h3>Before and after</h3><p class="dim">{}</p>{}', names,
                table(["", "before", "after", "change"], rows, numeric={1, 2, 3}, table_id="deltas"))
