"""The terminal view of a FleetReport (rich): the fleet's totals, its groups by waste, the idle GPUs, the advice.

Printed through a ``SafeConsole``; pod, namespace, host and model labels come from whoever runs the exporters:
every string of the report is made ``printable`` first."""

from __future__ import annotations

import time

from rich.console import Console, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuscope.console import SafeConsole
from gpuscope.fleet.serving_view import serving_table
from gpuscope.format import gib, gpu_model, pct, printable_all, usd, without_credentials
from gpuscope.model.fleet import FleetReport, GroupReport

MAX_GROUPS = 20
MAX_IDLE = 20


def render_fleet(report: FleetReport, console: Console | None = None, *, run_id: str | None = None) -> None:
    console = console or SafeConsole()
    for part in fleet_sections(report, run_id=run_id):
        console.print(part)


def fleet_sections(report: FleetReport, *, run_id: str | None = None) -> list[RenderableType]:
    report = printable_all(report)
    out: list[RenderableType] = [_header(report, run_id), _groups(report)]
    if report.idle_gpus:
        out.append(_idle(report))
    if report.serving:
        out.append(serving_table(report.serving))
    if report.recommendations:
        out.append(_advice(report))
    for w in report.warnings:
        out.append(Text(f"warning: {w}", style="yellow"))
    return out


def hours(value: float) -> str:
    """GPU-hours: two decimals, or three significant digits under one hour (a short window is not "0.00")."""
    return f"{value:,.2f}" if value >= 1 or value == 0 else f"{value:.3g}"


def energy(kwh: float | None) -> str:
    if kwh is None:
        return "n/a"
    return f"{kwh:,.2f} kWh" if kwh >= 1 or kwh == 0 else f"{kwh * 1000:.3g} Wh"


def _utc(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ns / 1e9))


def _header(report: FleetReport, run_id: str | None) -> RenderableType:
    where = without_credentials(report.prometheus_url) + (f"  {{{report.selector}}}" if report.selector else "")
    lines = Text.assemble(
        ("gpuscope fleet", "bold"), (f"  run {run_id}" if run_id else "", "cyan"), f"  ·  {where}\n",
        f"{_utc(report.start_ns)} to {_utc(report.end_ns)}, step {report.step_s:g} s  ·  ",
        f"{report.gpus} GPUs  ·  {hours(report.gpu_hours)} GPU-h  ·  busy {pct(report.busy)}\n",
        f"cost {usd(report.cost_usd)}  ·  wasted {usd(report.wasted_usd)} (idle {usd(report.idle_usd)})  ·  ",
        f"energy {energy(report.energy_kwh)}  ·  idle GPUs: {len(report.idle_gpus)}")
    shared = shared_line(report)
    if shared:
        lines.append(f"\n{shared}")
    return Panel(lines, border_style="magenta")


_SPLITS = {"measured": "by the pods' measured SM use", "even": "evenly (no per-pod use reported)",
           "mixed": "by the pods' measured SM use where reported, evenly otherwise"}


def shared_line(report: FleetReport) -> str | None:
    """"2 GPUs shared between pods: each pod pays its part, split evenly (...)"; None when no GPU was shared."""
    if not report.shared_gpus:
        return None
    many = "s" if report.shared_gpus != 1 else ""
    return (f"{report.shared_gpus} GPU{many} shared between pods: each pod pays its part, split "
            f"{_SPLITS.get(report.split or '', 'evenly')}, never the whole GPU")


def sharing(g: GroupReport) -> str:
    """What a group's GPUs were: MIG slices ("MIG 1g.10gb"), shared with other pods ("shared, even"), or whole."""
    parts = [f"MIG {', '.join(g.mig_profiles)}"] if g.mig_profiles else []
    if g.split is not None:
        parts.append(f"shared, {g.split}")
    return "; ".join(parts)


def _groups(report: FleetReport) -> RenderableType:
    table = Table(title=Text(f"By {report.group_by}, most waste first"), title_justify="left", box=None,
                  header_style="bold")
    kinds = any(sharing(g) for g in report.groups)
    for col in (report.group_by, "GPUs", "GPU-h", "busy", "SM · tensor", "cost", "wasted", "idle GPU-h", "energy",
                "peak mem", *(("GPU kind",) if kinds else ())):
        table.add_column(Text(col), justify="left" if col in (report.group_by, "GPU kind") else "right",
                         overflow="fold")
    for g in report.groups[:MAX_GROUPS]:
        table.add_row(Text(g.name), str(g.gpus), hours(g.gpu_hours), pct(g.busy), pipes(g), usd(g.cost_usd),
                      usd(g.wasted_usd), hours(g.idle_gpu_hours), energy(g.energy_kwh), gib(g.peak_memory_bytes),
                      *((Text(sharing(g)),) if kinds else ()))
    if len(report.groups) > MAX_GROUPS:
        table.caption = f"{len(report.groups) - MAX_GROUPS} more groups in --json"
    return table


def pipes(g: GroupReport) -> str:
    """DCGM's SM activity beside its tensor-pipe activity ("72% · 31%"), each n/a where the exporter gave none."""
    return f"{pct(g.sm_active, 0)} · {pct(g.tensor_active, 0)}"


def _idle(report: FleetReport) -> RenderableType:
    table = Table(title="Idle GPUs (held, idle most of the time they reported)", title_justify="left", box=None,
                  header_style="bold")
    for col in ("host", "GPU", "model", f"held by ({report.group_by})", "busy", "idle", "GPU-h", "cost"):
        table.add_column(Text(col), justify="right" if col in ("GPU", "busy", "idle", "GPU-h", "cost") else "left",
                         overflow="fold")
    for i in report.idle_gpus[:MAX_IDLE]:
        model = gpu_model(i.model, i.mig_profile) if i.model else "n/a"
        table.add_row(Text(i.host or "n/a"), str(i.gpu), Text(model), Text(i.group), pct(i.busy),
                      pct(i.idle_share, 0),
                      hours(i.gpu_hours), usd(i.cost_usd))
    if len(report.idle_gpus) > MAX_IDLE:
        table.caption = f"{len(report.idle_gpus) - MAX_IDLE} more in --json"
    return table


def _advice(report: FleetReport) -> RenderableType:
    lines = Text()
    for n, rec in enumerate(report.recommendations, 1):
        saving = f"  (saves {usd(rec.est_saving_usd)} over the window)" if rec.est_saving_usd is not None else ""
        lines.append(f"{n}. {rec.title}{saving}\n", style="bold")
        lines.append(f"   {rec.detail}\n")
    lines.rstrip()
    return Panel(lines, title="What to do", border_style="green")
