"""The terminal view of a Report (rich): verdict first, then the numbers that prove it.

Printed through a ``SafeConsole``; every string of the report is made ``printable`` first (names from the
trace or the user: run, GPU, kernel, frame), so each reads as the one line of text it is."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.console import SafeConsole
from gpuscope.format import (
    JOB_LENGTH_HINT,
    busy_window_words,
    container_line,
    evidence_item,
    gib,
    gpu_time,
    gpus_line,
    hourly_usd,
    ms,
    num,
    outlier_line,
    pct,
    price_line,
    printable_all,
    recurring_line,
    saving_text,
    shared_cost_line,
    shared_gpu_line,
    step_line,
    usd,
    window_words,
    windows_line,
)
from gpuscope.model.cost import CostReport
from gpuscope.model.diagnosis import resource_word
from gpuscope.model.live import GpuLive, HostLive, LiveSummary, StackLive
from gpuscope.model.rank import RankReport, StepBreakdown
from gpuscope.model.report import Report
from gpuscope.reports import stragglers
from gpuscope.reports.efficiency_view import efficiency_panel
from gpuscope.reports.queue_view import queue_lines, step_source_words
from gpuscope.reports.serving_view import serving_panel

_BREAKDOWN_ORDER = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")
_LABELS = {"kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset", "communication": "Communication",
           "runtime": "Runtime", "dataloader": "DataLoader", "cpu_exec": "CPU Exec", "other": "Other"}


def render(report: Report, console: Console | None = None) -> None:
    console = console or SafeConsole()
    for part in sections(report):
        console.print(part)


def sections(report: Report) -> list[RenderableType]:
    report = printable_all(report)
    out: list[RenderableType] = [_header(report), _verdict(report)]
    steps = _steps(report)
    if steps is not None:
        out.append(steps)
    if report.live is not None:
        out.append(_live(report.live))
    if report.ranks:
        out.append(_ranks(report.ranks) if len(report.ranks) > 1 else _rank(report.ranks[0]))
    if report.efficiency is not None:
        out.append(efficiency_panel(report.efficiency))
    across = stragglers.panel(report)
    if across is not None:
        out.append(across)
    if report.serving is not None:
        out.append(serving_panel(report.serving))
    if report.findings:
        out.append(_findings(report))
    if report.recommendations:
        out.append(_recommendations(report))
    if report.cost is not None:
        out.append(_cost(report))
    for w in report.warnings:
        out.append(Text(f"warning: {w}", style="yellow"))
    return out


def _header(report: Report) -> RenderableType:
    run = report.run
    gpus = gpus_line([(g.model, g.mig_profile) for g in run.gpus], cpu_job=report.cpu_job)
    where = container_line(run.tags)
    kind = _KIND_WORDS.get(run.kind, run.kind)
    return Text.assemble(("gpuscope ", "bold"), (f"{kind} {run.id}", "cyan"), f"  {run.name}  ·  {gpus}",
                         f"\n{where}" if where else "")


_KIND_WORDS = {"trace": "trace run", "run": "recorded run", "attach": "attached run", "fleet": "fleet run",
               "memory": "memory run"}
"""A run's kind as the header reads it ("gpuscope run run ..." would repeat the word)."""


def _verdict(report: Report) -> RenderableType:
    v = report.verdict
    stage_order = ("data_loading", "host_overhead", "communication", "memory", "idle", "gpu_compute")
    if v.primary is None:
        body: RenderableType = Text(v.summary or "No verdict: not enough evidence in this run.", style="dim")
        return Panel(body, title="Verdict", border_style="dim")
    title = Text.assemble((v.primary.replace("_", " "), "bold"), f"  ·  resource: {resource_word(v)}",
                          f"  ·  confidence {pct(v.confidence, 0)}")
    lines: list[RenderableType] = [title]
    if v.summary:
        lines.append(Text(v.summary))
    if v.secondary:
        lines.append(Text("also holding it back: " + ", ".join(s.replace("_", " ") for s in v.secondary)))
    shares = [(st, v.evidence.get(f"{st}_share")) for st in stage_order]
    known = [(st, x) for st, x in shares if isinstance(x, (int, float))]
    if known:
        lines.append(Text("where the typical step goes: " + " · ".join(
            f"{st.replace('_', ' ').replace('gpu', 'GPU')} {pct(float(x))}" for st, x in known), style="dim"))
    rest = {k: val for k, val in v.evidence.items() if not k.endswith("_share")}
    if rest:
        lines.append(Text(" · ".join(evidence_item(k, val) for k, val in rest.items()), style="dim"))
    return Panel(Group(*lines), title="Verdict", border_style="magenta")


SHOWN_OUTLIERS = 5


def _steps(report: Report) -> RenderableType | None:
    """The job's step time and its spread, then each outlier step, marked, with what took its extra time."""
    facts = facts_of(report)
    line = step_line(facts)
    if line is None:
        return None
    lines: list[RenderableType] = [Text.assemble(("step time ", "bold"), line)]
    if facts.recurring is not None:
        lines.append(Text.assemble(("recurring ", "bold yellow"), recurring_line(facts.recurring),
                                   " (slow steps that came back: in the step time, and in the typical step)"))
    for o in report.outlier_steps[:SHOWN_OUTLIERS]:
        lines.append(Text.assemble(("outlier ", "bold red"), outlier_line(o, ranks=len(report.ranks))))
    if len(report.outlier_steps) > SHOWN_OUTLIERS:
        lines.append(Text(f"... and {len(report.outlier_steps) - SHOWN_OUTLIERS} more (--json: outlier_steps)",
                          style="dim"))
    if facts.outlier_step_count:
        lines.append(Text(f"outlier: the one step past {ms(facts.outlier_threshold_us)} (median + max(3.5 x "
                          "spread, 25% of the median)) that did not recur: in the step time, left out of the "
                          "typical step the stage shares are of", style="dim"))
    windows = windows_line(facts, report.ranks, report.outlier_steps)
    if windows is not None:
        lines.append(Text(f"windows: {windows}", style="dim"))
    return Panel(Group(*lines), title="Steps", border_style="blue")


def _live(live: LiveSummary) -> RenderableType:
    """What live sampling saw: one row per GPU, one line for the host tree, where the threads spent their time."""
    sources = ", ".join(live.sources) or "no collector"
    parts: list[RenderableType] = [Text(f"sampled {live.duration_s:.1f} s from {sources}", style="dim")]
    parts.append(_live_gpus(live.gpus) if live.gpus else Text("no GPU samples", style="dim"))
    for share in live.shares:
        if share.shared:
            parts.append(Text(shared_gpu_line(share), style="bold"))
    if live.host is not None:
        parts.append(_live_host(live.host))
    if live.stacks is not None:
        parts.extend(_live_stacks(live.stacks))
    return Panel(Group(*parts), title="Live", border_style="cyan")


def _live_gpus(gpus: tuple[GpuLive, ...]) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("GPU", "util", "SM active", "tensor", "peak memory", "power", "energy", "idle", "throttled by"):
        table.add_column(col, justify="left" if col == "throttled by" else "right", overflow="fold")
    for g in gpus:
        of_total = (f" ({pct(g.memory_used_peak_bytes / g.memory_total_bytes, 0)})"
                    if g.memory_used_peak_bytes is not None and g.memory_total_bytes else "")
        energy = None if g.energy_j is None else g.energy_j / 1000
        table.add_row(str(g.gpu), pct(g.util_mean), pct(g.sm_active_mean), pct(g.tensor_active_mean),
                      "n/a" if g.memory_used_peak_bytes is None
                      else f"{gib(g.memory_used_peak_bytes)} of {gib(g.memory_total_bytes)}{of_total}",
                      num(g.power_mean_w, " W", 0), num(energy, " kJ", 2), pct(g.idle_share),
                      Text(", ".join(r.replace("_", " ") for r in g.throttle_reasons) or "none seen"))
    return table


def _live_host(h: HostLive) -> Text:
    reads = None if h.read_bytes_per_s is None else h.read_bytes_per_s / 1e6
    workers = f"{h.workers} DataLoader worker{'s' if h.workers != 1 else ''}" + (
        f" using {num(h.workers_cpu_mean, ' cores', 2)}" if h.workers else "")
    return Text.assemble(("host ", "bold"), f"main process {num(h.main_cpu_mean, ' cores', 2)} · {workers}\n",
                         ("     ", ""), f"iowait {pct(h.iowait_mean)} · reads {num(reads, ' MB/s')}"
                         f" · RSS peak {gib(h.rss_peak_bytes)}")


def _live_stacks(s: StackLive) -> list[RenderableType]:
    main = (("DataLoader wait", s.main_dataloader_wait), ("sync", s.main_sync), ("NCCL wait", s.main_nccl_wait),
            ("launch", s.main_launch), ("Python", s.main_python), ("idle", s.main_idle))
    lines: list[RenderableType] = [Text.assemble(
        ("main thread ", "bold"), " · ".join(f"{name} {pct(share)}" for name, share in main),
        (f"  n={s.main_samples}", "dim"))]
    if s.worker_samples:
        lines.append(Text.assemble(("workers ", "bold"), f"on CPU {pct(s.workers_on_cpu)} · blocked on reads "
                                   f"{pct(s.workers_io)} · waiting for work {pct(s.workers_idle)}",
                                   (f"  n={s.worker_samples}", "dim")))
    if s.top_stack:
        # Innermost frames say what the thread was doing; the outer ones are the same in every stack.
        lines.append(Text("top stack: " + _short(" <- ".join(reversed(s.top_stack[-3:])), 100), style="dim"))
    return lines


def _breakdown_table(b: StepBreakdown, step_us: float, title: str) -> Table:
    """The rank's mean step in the TensorBoard plugin's categories: time per step and share of the step."""
    table = Table(box=None, show_header=False, pad_edge=False, title=title, title_justify="left",
                  title_style="dim")
    table.add_column(style="bold", overflow="fold")
    table.add_column(justify="right", overflow="fold")
    table.add_column(justify="right", overflow="fold")
    table.add_column(overflow="fold")
    for key in _BREAKDOWN_ORDER:
        value = getattr(b, key)
        share = value / step_us if step_us else 0.0
        table.add_row(_LABELS[key], ms(value), pct(share), "█" * round(share * 40))
    return table


def _rank(r: RankReport) -> RenderableType:
    """One rank, each figure beside the window it is over: the step and GPU busy over the steady window, the
    window itself and HTA's idle time over the whole window."""
    if r.step_time_us is not None:
        step = (f" per step, the mean of {r.steps} steady step{'s' if r.steps != 1 else ''}"
                + (f" ({step_source_words(r.step_source)})" if r.step_source not in (None, "ProfilerStep") else "")
                + (f" ({r.startup.warmup_steps} warm-up left out)" if r.startup and r.startup.warmup_steps else "")
                + (f"; median {ms(r.step_time_median_us)}, p90 {ms(r.step_time_p90_us)}"
                   if r.step_time_median_us is not None else ""))
        head_step: tuple[str | tuple[str, str], ...] = (("step ", "bold"), ms(r.step_time_us), step)
        breakdown_title = "mean per steady step"
    else:
        head_step = (("no profiler steps", "bold"), " (the breakdown covers the steady window)")
        breakdown_title = "over the steady window"
    head = Text.assemble(*head_step, " · ", ("window ", "bold"), ms(r.window_us), f" ({window_words(r)})")
    if not r.cpu_only:  # a CPU process has no GPU to be busy and no device memory
        peak = gib(r.memory.peak_allocated_bytes)
        head = Text.assemble(("GPU busy ", "bold"), pct(r.gpu_busy), f" of {busy_window_words(r)}", " · ", head,
                             " · ", ("peak memory ", "bold"),
                             f"{'at least ' if r.memory.lower_bound and r.memory.peak_allocated_bytes else ''}"
                             f"{peak} of {gib(r.memory.device_bytes)}")
    if len(r.devices) > 1:
        head.append(" · " + ", ".join(f"GPU {d.device} busy {pct(d.busy)}" for d in r.devices))
    parts: list[RenderableType] = [head, _breakdown_table(r.step_breakdown_us, r.span_us, breakdown_title)]
    if r.idle_breakdown_us is not None and r.temporal is not None:
        i = r.idle_breakdown_us
        side = f"GPU-side wait {ms(i.gpu_side_wait)}, " if i.gpu_side_wait else ""
        parts.append(Text(f"GPU idle over the whole window ({ms(r.window_us)}; HTA's idle breakdown) "
                          f"{ms(r.temporal.idle_us)}: {side}host wait {ms(i.host_wait)}, kernel wait "
                          f"{ms(i.kernel_wait)}, other {ms(i.other)}", style="dim"))
    parts.extend(Text(line, style="dim") for line in queue_lines(r))
    if r.communication.total_us:
        c = r.communication
        exposed = (r.stage_shares or {}).get("communication")
        parts.append(Text(f"collective kernels {ms(c.total_us / max(r.steps, 1))} per steady step, {pct(c.overlap)} "
                          f"of it under compute; exposed communication {pct(exposed)} of the typical step",
                          style="dim"))
    if r.communication.collectives:
        parts.append(Text("collectives: " + "; ".join(
            f"{s.op} {s.size_bucket} x{s.count}: bus {num(s.busbw_gbps, ' GB/s')} (algorithm {num(s.algbw_gbps)})"
            for s in r.communication.collectives[:3]), style="dim"))
    if r.top_kernels:
        k = r.top_kernels[0]
        parts.append(Text(f"top kernel: {_short(k.name)} ({pct(k.share)} of kernel time over the whole window, "
                          f"{k.count} calls)", style="dim"))
    kind = f" · {r.workload}" if r.workload else ""
    device = "CPU only" if r.cpu_only else r.device or "unknown GPU"
    title = Text(f"Rank {r.rank} · {device}{kind}")  # a str title would be read as markup
    return Panel(Group(*parts), title=title, border_style="blue")


def _ranks(ranks: tuple[RankReport, ...]) -> RenderableType:
    """One row per rank: its step (mean and median per step), GPU busy, and its stage shares of the typical step
    (the numbers the job's stage shares average)."""
    if all(r.cpu_only for r in ranks):
        return _cpu_ranks(ranks)
    table = Table(title="Ranks: mean and median step; shares of the rank's typical step", header_style="bold",
                  box=None)
    for col in ("rank", "mean", "median", "GPU busy", "compute", "exposed comm", "data wait", "host", "peak mem"):
        table.add_column(col, justify="right", overflow="fold")
    for r in ranks:
        shares = r.stage_shares or {}
        table.add_row(str(r.rank), ms(r.step_time_us), ms(r.step_time_median_us), pct(r.gpu_busy),
                      pct(shares.get("gpu_compute")), pct(shares.get("communication")), pct(shares.get("data_loading")),
                      pct(shares.get("host_overhead")), gib(r.memory.peak_allocated_bytes))
    return table


def _cpu_ranks(ranks: tuple[RankReport, ...]) -> RenderableType:
    """The ranks of a CPU job: the step and where it goes, nothing of a GPU."""
    table = Table(title="Ranks (CPU only)", header_style="bold", box=None)
    for col in ("rank", "step", "CPU exec", "communication", "dataloader"):
        table.add_column(col, justify="right", overflow="fold")
    for r in ranks:
        b, step = r.step_breakdown_us, r.span_us or 1.0
        table.add_row(str(r.rank), ms(r.step_time_us), pct(b.cpu_exec / step), pct(b.communication / step),
                      pct(b.dataloader / step))
    return table


def _findings(report: Report) -> RenderableType:
    """Each finding as a sentence that wraps whole (a table's narrow column would break it across lines), its
    evidence in words under it."""
    lines: list[RenderableType] = []
    styles = {"critical": "red", "warning": "yellow", "info": "dim"}
    for f in report.findings:
        ev = ", ".join(evidence_item(k, v) for k, v in list(f.evidence.items())[:5])
        where = f"[rank {f.rank}] " if f.rank is not None and len(report.ranks) > 1 else ""
        lines.append(Text.assemble((f.severity, styles.get(f.severity, "")), f"  {where}{f.title}"))
        if ev:
            lines.append(Text(f"   {ev}", style="dim"))
    return Panel(Group(*lines), title="Findings", border_style="white")


def _recommendations(report: Report) -> RenderableType:
    lines: list[RenderableType] = []
    for i, rec in enumerate(report.recommendations, 1):
        saving = saving_text(rec, report.cost)
        lines.append(Text.assemble((f"{i}. {rec.title}", "bold"), f": {saving}" if saving else ""))
        lines.append(Text(f"   {rec.detail}"))
        if rec.reasoning:
            lines.append(Text(f"   estimate: {rec.reasoning}", style="dim"))
    return Panel(Group(*lines), title="What to change", border_style="green")


def _cost(report: Report) -> RenderableType:
    """The money a reader can use first: the whole job (or how to give its length), per hour of the run's GPUs,
    per 1,000 steps; then what this run itself cost and the price behind it all."""
    c = report.cost
    assert c is not None
    parts: list[RenderableType] = [*_cost_framed(report, c)]
    if c.held_usd is not None:
        parts.append(Text.assemble(("shared GPU ", "bold"),
                                   shared_cost_line(c.own_usd, c.held_usd, c.own_basis, c.neighbours_usd)))
    gpus = f" on {c.gpu_count} GPU{'s' if c.gpu_count != 1 else ''}" if c.gpu_count else ""
    price = price_line(c.usd_per_gpu_hour, c.price_source, share_basis=c.gpu_share_basis,
                       whole_usd_per_gpu_hour=c.whole_usd_per_gpu_hour)
    parts.append(Text.assemble(("this run ", "bold"), usd(c.total_usd), f" ({gpu_time(c.gpu_hours)}{gpus} {price})",
                               style="dim"))
    parts.append(_energy(c))
    if c.mfu_gap_usd is not None and c.target_mfu is not None:
        parts.append(Text.assemble(("below the MFU target ", "bold"), usd(c.mfu_gap_usd),
                                   f" (the gap between this run's MFU and {pct(c.target_mfu)}, priced)"))
    if c.note:
        parts.append(Text(c.note, style="yellow"))
    return Panel(Group(*parts), title="Cost", border_style="yellow")


def _cost_framed(report: Report, c: CostReport) -> list[RenderableType]:
    total = c.total_usd or 0.0
    wasted_share = c.wasted_usd / total if c.wasted_usd is not None and total else None
    lines: list[RenderableType] = []
    if c.projected_usd is not None:
        basis = {"job_hours": "--job-hours", "job_steps": "--job-steps"}.get(c.projection_basis or "", "")
        lines.append(Text.assemble(("whole job ", "bold"), usd(c.projected_usd), f" ({basis})" if basis else "",
                                   f", of which wasted {usd(c.projected_wasted_usd)}"
                                   if c.projected_wasted_usd is not None else ""))
    hourly = hourly_usd(c)
    if hourly is not None:
        wasted = f", of which wasted {usd(hourly * wasted_share)}" if wasted_share is not None else ""
        lines.append(Text.assemble(("per hour ", "bold"), usd(hourly), wasted))
    if c.per_1k_steps_usd is not None:
        unit = "requests" if report.ranks and all(r.workload == "inference" for r in report.ranks) else "samples"
        per_samples = (f" · per 1,000 {unit} {usd(c.per_1k_samples_usd)}"
                       if c.per_1k_samples_usd is not None else "")
        lines.append(Text.assemble(("per 1,000 steps ", "bold"), usd(c.per_1k_steps_usd), per_samples))
    if c.wasted_usd is not None:
        causes = sorted(((v, k) for k, v in vars(c.waste_by_cause_usd).items() if v), reverse=True)
        split = ", ".join(f"{k.replace('_', ' ')} {pct(v / total if total else None)}" for v, k in causes)
        lines.append(Text.assemble(("wasted ", "bold"), f"{pct(wasted_share)} of the cost",
                                   f": {split}" if split else ""))
    if c.projected_usd is None and report.run.kind == "trace":
        lines.append(Text(JOB_LENGTH_HINT[0].upper() + JOB_LENGTH_HINT[1:] + ".", style="cyan"))
    return lines


def _energy(c: CostReport) -> RenderableType:
    if c.energy_kwh is None:
        return Text("energy n/a (no GPU power samples in this run)", style="dim")
    co2 = f", CO2 {c.co2_kg:.3g} kg at {c.grid_kg_co2_per_kwh:g} kg/kWh ({c.grid_source})" \
        if c.co2_kg is not None and c.grid_kg_co2_per_kwh is not None else ", CO2 n/a"
    return Text(f"energy {c.energy_kwh:.3g} kWh ({(c.energy_source or '').replace('_', ' ')}){co2}", style="dim")


def _short(name: str, width: int = 70) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
