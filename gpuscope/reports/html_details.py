"""The HTML report's detail pages: steps per step and per rank, kernels, communication, memory, what live
sampling saw, findings with their evidence, every recommendation, the cost's parts, and how each figure
was computed. Numbers go through ``gpuscope.format``, as in the terminal; charts through ``figures``."""

from __future__ import annotations

import pandas as pd
from markupsafe import Markup

from gpuscope import figures
from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.figures.base import BREAKDOWN_LABELS, BREAKDOWN_ORDER, Absent
from gpuscope.figures.kernels import merge_kernels
from gpuscope.format import (
    evidence_item,
    gib,
    ms,
    num,
    outlier_line,
    pct,
    recurring_line,
    saving_text,
    shared_gpu_line,
    step_line,
    usd,
    windows_line,
)
from gpuscope.model.cost import CostReport
from gpuscope.model.live import LiveSummary, StackLive
from gpuscope.model.rank import RankReport
from gpuscope.model.report import Report
from gpuscope.model.run import StackSamples
from gpuscope.reports.html_blocks import Cell, Charts, html, join, table

TABLE_KERNELS = 10
NO_TRACE = Absent("no profiler trace in this run")
KERNEL_NAME_CHARS = 110


def steps(report: Report, charts: Charts) -> Markup:
    if not report.ranks:
        return charts.block("steps", NO_TRACE)
    first = report.ranks[0]
    out = [Markup("<h2>Step time</h2>"), _spread(report), _breakdown(report.ranks)]
    out.append(charts.block("steps", figures.step_breakdown(first, figures.outlier_names(report)),
                            f"Each profiler step of rank {first.rank}, split by the TensorBoard plugin's categories, "
                            "with its median and p90 step; outlier steps marked."))
    if len(report.ranks) > 1:
        out.append(charts.block("ranks", figures.rank_comparison(report.ranks)))
        out.append(Markup("<h3>Each rank side by side</h3>") + _ranks(report.ranks))
    idle = [r for r in report.ranks if r.temporal is not None and r.idle_breakdown_us is not None]
    if idle:
        rows: list[list[Cell]] = [[str(r.rank), ms(r.temporal.idle_us if r.temporal else None),
                 ms(r.idle_breakdown_us.host_wait if r.idle_breakdown_us else None),
                 ms(r.idle_breakdown_us.kernel_wait if r.idle_breakdown_us else None),
                 ms(r.idle_breakdown_us.other if r.idle_breakdown_us else None)] for r in idle]
        head = ["rank", "idle", "host wait", "kernel wait", "other"]
        out.append(Markup("<h3>GPU idle time (over the whole window)</h3>") + table(head, rows, numeric={0, 1, 2, 3, 4},
                                                                         table_id="idle"))
    return join(out)


def _spread(report: Report) -> Markup:
    """The job's step time and spread, and a table of its outlier steps (what took their time, what it cost)."""
    facts = facts_of(report)
    line = step_line(facts)
    if line is None:
        return Markup()
    out = html('<p id="step-spread"><strong>step time</strong> {}</p>', line)
    if facts.recurring is not None:
        out += html('<p id="recurring-steps"><strong>recurring</strong> {}</p>', recurring_line(facts.recurring))
    windows = windows_line(facts, report.ranks, report.outlier_steps)
    if windows is not None:
        out += html('<p id="step-windows" class="dim">windows: {}</p>', windows)
    if report.outlier_steps:
        items = join([html('<li class="outlier"><strong>outlier</strong> {}</li>', outlier_line(o, ranks=len(
            report.ranks))) for o in report.outlier_steps])
        out += html('<ul id="outlier-steps">{}</ul>', items)
    return out


def _breakdown(ranks: tuple[RankReport, ...]) -> Markup:
    """The mean step split into the plugin's categories, one column per rank; then each rank's median and p90."""
    head = ["category"] + [f"rank {r.rank}" for r in ranks] + (["share (rank 0)"] if len(ranks) == 1 else [])
    rows: list[list[Cell]] = []
    for key in BREAKDOWN_ORDER:
        row: list[Cell] = [BREAKDOWN_LABELS[key], *(ms(getattr(r.step_breakdown_us, key)) for r in ranks)]
        if len(ranks) == 1:
            step = ranks[0].step_time_us
            row.append(pct(getattr(ranks[0].step_breakdown_us, key) / step if step else None))
        rows.append(row)
    rows.append([Markup("<strong>step (mean)</strong>"), *(ms(r.step_time_us) for r in ranks),
                 *(["100.0%"] if len(ranks) == 1 else [])])
    rows.append(["step median", *(ms(r.step_time_median_us) for r in ranks), *([""] if len(ranks) == 1 else [])])
    rows.append(["step p90", *(ms(r.step_time_p90_us) for r in ranks), *([""] if len(ranks) == 1 else [])])
    return table(head, rows, numeric=set(range(1, len(head))), table_id="breakdown")


def _ranks(ranks: tuple[RankReport, ...]) -> Markup:
    """Each rank's step (mean and median, per step) and its stage shares of its typical step: the numbers the job's
    stage shares average."""
    rows: list[list[Cell]] = []
    for r in ranks:
        shares = r.stage_shares or {}
        device = "CPU only" if r.cpu_only else r.device or "n/a"
        rows.append([str(r.rank), device, str(r.steps), ms(r.step_time_us), ms(r.step_time_median_us),
                     pct(r.gpu_busy), pct(shares.get("gpu_compute")), pct(shares.get("communication")),
                     pct(shares.get("data_loading")), pct(shares.get("host_overhead"))])
    head = ["rank", "GPU", "steps", "step mean", "step median", "GPU busy (steady window)",
            "compute (% of typical step)", "exposed comm (% of typical step)", "data wait (% of typical step)",
            "host (% of typical step)"]
    return table(head, rows, numeric={0, 2, 3, 4, 5, 6, 7, 8, 9}, table_id="ranks")


def kernels(report: Report, charts: Charts) -> Markup:
    if not report.ranks:
        return charts.block("kernels", figures.top_kernels(()))
    merged = merge_kernels(report.ranks)[:TABLE_KERNELS]
    rows: list[list[Cell]] = [[str(i), html('<span class="name" title="{}">{}</span>', k.name, _short(k.name)),
                               k.category, num(k.count), ms(k.total_us), pct(k.share)]
                              for i, k in enumerate(merged, 1)]
    grid = table(["#", "kernel", "class", "calls (per window)", "total (per window)", "share of kernel time"], rows,
                 numeric={0, 3, 4, 5}, table_id="kernels") if rows else Markup('<p class="absent">No kernels.</p>')
    return Markup("<h2>Top kernels</h2>") + charts.block("kernels", figures.top_kernels(report.ranks)) + grid


def _short(name: str, width: int = KERNEL_NAME_CHARS) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def communication(report: Report) -> Markup:
    if not report.ranks:
        return Markup()
    if not any(r.communication.total_us for r in report.ranks):
        return Markup('<h2>Communication</h2><p class="dim">No collective communication in the trace.</p>')
    rows: list[list[Cell]] = [[str(r.rank), ms(r.communication.total_us / max(r.steps, 1)),
                               pct((r.stage_shares or {}).get("communication")), pct(r.communication.overlap),
                               num(r.communication.kernels)] for r in report.ranks]
    head = ["rank", "collective kernels per step", "exposed (% of the typical step)", "under compute",
            "kernels (per window)"]
    return Markup("<h2>Communication</h2>") + table(head, rows, numeric={0, 1, 2, 3, 4}, table_id="communication")


def memory(report: Report) -> Markup:
    if not report.ranks:
        return Markup()
    rows: list[list[Cell]] = [[str(r.rank), gib(r.memory.peak_allocated_bytes), gib(r.memory.device_bytes),
                               pct(r.memory.peak_share)] for r in report.ranks]
    return Markup("<h2>Memory</h2>") + table(["rank", "peak allocated", "device memory", "peak share"], rows,
                                     numeric={0, 1, 2, 3}, table_id="memory")


def live(summary: LiveSummary | None, samples: pd.DataFrame | None, stacks: StackSamples | None,
         charts: Charts) -> Markup:
    out = [Markup("<h2>Live sampling</h2>")]
    if summary is None and samples is None and stacks is None:
        out = []
    if summary is not None:
        out.append(html('<p class="dim">sampled {} s from {}</p>', f"{summary.duration_s:.1f}",
                        ", ".join(summary.sources) or "no collector"))
        if summary.gpus:
            rows: list[list[Cell]] = [[str(g.gpu), num(g.samples), pct(g.util_mean), pct(g.sm_active_mean),
                     pct(g.tensor_active_mean), pct(g.sm_occupancy_mean), pct(g.dram_active_mean),
                     gib(g.memory_used_peak_bytes), num(g.power_mean_w, " W", 0),
                     num(None if g.energy_j is None else g.energy_j / 1000, " kJ", 2), pct(g.idle_share),
                     ", ".join(t.replace("_", " ") for t in g.throttle_reasons) or "none seen"]
                    for g in summary.gpus]
            out.append(table(["GPU", "samples", "util", "SM active", "tensor pipes", "SM occupancy", "DRAM active",
                              "peak memory", "power", "energy", "idle", "throttled by"], rows,
                             numeric=set(range(11)), table_id="live-gpus"))
        out += [html('<p class="shared-gpu">{}</p>', shared_gpu_line(s)) for s in summary.shares if s.shared]
        if summary.host is not None:
            h = summary.host
            reads = None if h.read_bytes_per_s is None else h.read_bytes_per_s / 1e6
            out.append(html("<p>{}</p>", f"Host: main process {num(h.main_cpu_mean, ' cores', 2)} · {h.workers} "
                            f"DataLoader worker(s) using {num(h.workers_cpu_mean, ' cores', 2)} · iowait "
                            f"{pct(h.iowait_mean)} · reads {num(reads, ' MB/s')} · RSS peak {gib(h.rss_peak_bytes)}"))
        if summary.stacks is not None:
            out.append(_stacks(summary.stacks))
    out.append(charts.block("gpu timelines", figures.gpu_timelines(samples)))
    out.append(charts.block("host timelines", figures.host_timelines(samples)))
    out.append(charts.block("stacks", figures.stack_icicle(stacks)))
    return join(out)


def _stacks(s: StackLive) -> Markup:
    """Where the threads spent their time, as the terminal says it (py-spy samples)."""
    lines = []
    if s.main_samples:
        parts = (("DataLoader wait", s.main_dataloader_wait), ("sync", s.main_sync), ("NCCL wait", s.main_nccl_wait),
                 ("launch", s.main_launch), ("Python", s.main_python), ("idle", s.main_idle))
        lines.append(f"Main thread (n={num(s.main_samples)}): "
                     + " · ".join(f"{name} {pct(share)}" for name, share in parts))
    if s.worker_samples:
        lines.append(f"DataLoader workers (n={num(s.worker_samples)}): on CPU {pct(s.workers_on_cpu)} · "
                     f"blocked on reads {pct(s.workers_io)} · waiting for work {pct(s.workers_idle)}")
    if not lines:
        lines.append(f"{num(s.samples)} stack samples, none of the main thread or of DataLoader workers")
    return join(html("<p>{}</p>", line) for line in lines)


def findings(report: Report) -> Markup:
    if not report.findings:
        return Markup()
    many = len(report.ranks) > 1
    rows: list[list[Cell]] = []
    for f in report.findings:
        where = f"[rank {f.rank}] " if f.rank is not None and many else ""
        evidence = ", ".join(evidence_item(k, v) for k, v in f.evidence.items())
        rows.append([html('<span class="sev-{}">{}</span>', f.severity, f.severity), where + f.title,
                     pct(f.time_share), html('<span class="dim">{}</span>', evidence), html("<code>{}</code>", f.code)])
    return Markup("<h2>Findings</h2>") + table(["severity", "finding", "share", "evidence", "code"], rows,
                                       numeric={2}, table_id="findings")


def recommendations(report: Report) -> Markup:
    if not report.recommendations:
        return Markup()
    items = join(
        html('<li><strong>{}</strong> · <span class="saving">{}</span> <code>{}</code><p>{}</p>{}</li>',
             r.title, saving_text(r, report.cost), r.code, r.detail,
             html('<p class="dim">estimate: {}</p>', r.reasoning) if r.reasoning else "")
        for r in report.recommendations)
    return html('<h2>Every recommendation</h2><ol class="recs" id="recommendations">{}</ol>', items)


def cost(c: CostReport | None) -> Markup:
    if c is None:
        return Markup()
    energy = "n/a (no GPU power samples in this run)" if c.energy_kwh is None else (
        f"{c.energy_kwh:.3g} kWh ({(c.energy_source or '').replace('_', ' ')})")
    co2 = f"{c.co2_kg:.3g} kg at {c.grid_kg_co2_per_kwh:g} kg/kWh ({c.grid_source})" \
        if c.co2_kg is not None and c.grid_kg_co2_per_kwh is not None else "n/a"
    rows: list[list[Cell]] = [
        ["GPU-hours", f"{c.gpu_hours:.4g}"], ["GPUs charged", num(c.gpu_count)],
        ["price per GPU-hour", usd(c.usd_per_gpu_hour)], ["price source", c.price_source or "n/a"],
        ["this run", usd(c.total_usd)], ["wasted on this run", usd(c.wasted_usd)], ["per step", usd(c.per_step_usd)],
        ["per 1,000 steps", usd(c.per_1k_steps_usd)], ["per 1,000 samples", usd(c.per_1k_samples_usd)],
        ["whole job (projected)", usd(c.projected_usd)], ["whole job, wasted", usd(c.projected_wasted_usd)],
        ["energy", energy], ["CO2", co2]]
    return Markup("<h2>Cost</h2>") + table(["", "value"], rows, table_id="cost")


def warnings(report: Report, charts: Charts) -> Markup:
    out = join(html('<p class="warning">warning: {}</p>', w) for w in report.warnings)
    if charts.absent:
        rows: list[list[Cell]] = [[label, reason] for label, reason in charts.absent]
        out += Markup("<h3>Not shown</h3>") + table(["chart", "why"], rows, table_id="absent")
    return out


METHODS = (
    ("GPU busy", "The union of kernel, memcpy and memset intervals on a rank over its window (the profiler steps), "
                 "averaged over ranks. Sampled runs show NVML utilization instead: the share of time a kernel ran."),
    ("Step time", "The mean of the job's steady steps that are not outliers (a job's step ends when its slowest "
                  "rank's does). An outlier is a step longer than median + max(3.5 x spread, 25% of the median), "
                  "spread being 1.4826 x the median absolute deviation; outliers are listed, priced by their time "
                  "over the typical step, and left out of the stage shares and the verdict. Each rank's own mean "
                  "step is the TensorBoard plugin's, over all its steady steps."),
    ("Step breakdown", "The PyTorch profiler TensorBoard plugin's categories in its priority order (Kernel > Memcpy "
                       "> Memset > Communication > Runtime > DataLoader > CPU Exec > Other): each takes only time "
                       "no earlier one claimed, so the parts add up to the step. Means per step."),
    ("GPU idle time", "Holistic Trace Analysis' rules over each rank's whole window: host wait when the launch came "
                      "after the previous kernel ended, kernel wait for gaps under 30 µs, other for the rest."),
    ("Communication", "Collective kernels (NCCL and symmetric-memory all-reduce), per step; exposed is the "
                      "communication stage's share of the typical step (collective time no kernel, copy or memset "
                      "covers, plus host time blocked in collective waits), the figure the verdict, the findings "
                      "and the gate read; under compute, the share of collective kernel time compute kernels hide."),
    ("Memory", "Peak allocated from the profiler's memory events, against the device's memory."),
    ("Cost", "GPU-hours x the price per GPU-hour (the catalog's list price unless overridden). Waste is the part "
             "of it the stage shares behind the verdict say bought no compute, split by cause; a projection "
             "scales the run to --job-hours or --job-steps."),
    ("Savings", "Each recommendation's share of step time saved, with its reasoning, times the (projected) cost."),
    ("MFU and the roofline", "Model FLOPs per step (GEMMs, convolutions and attention, forward and backward, from "
                             "the recorded input shapes, each op counted once) over the step time x GPUs x the dense "
                             "peak of the run's GPU for the type most FLOPs ran in (the spec table, its datasheet "
                             "cited). A GPU not in the table has no MFU. Each kernel family's FLOPs and bytes over "
                             "its GPU time place it under min(peak, intensity x memory bandwidth)."),
    ("Live sampling", "NVML and DCGM per GPU, psutil for the target's process tree, py-spy stack samples; "
                      "timelines keep each time bucket's minimum and maximum, so spikes stay visible."),
)


def methods() -> Markup:
    items = join(html("<dt>{}</dt><dd>{}</dd>", term, text) for term, text in METHODS)
    return html('<h2>How each figure was computed</h2><dl class="methods">{}</dl>', items)
