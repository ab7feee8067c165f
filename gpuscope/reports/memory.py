"""The terminal view of a MemoryReport: per device, the peak against the device's size, what it was made of,
the largest places live then with their source lines, fragmentation, out-of-memory events and the advice."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuscope.console import SafeConsole
from gpuscope.format import gib, pct, printable_all, usd, without_credentials
from gpuscope.model.memory import DeviceMemory, MemoryAdvice, MemoryReport, PeakGroup

GROUPS_SHOWN = 12
FRAMES_SHOWN = 3


def render(report: MemoryReport, console: Console | None = None) -> None:
    console = console or SafeConsole()
    for part in sections(report):
        console.print(part)


def shown_source(report: MemoryReport) -> str:
    """What the report was read from, as every view shows it: secrets masked again (a report saved by an older
    version kept its source as given)."""
    return without_credentials(report.source)


def sections(report: MemoryReport) -> list[RenderableType]:
    report = printable_all(replace(report, source=shown_source(report)))
    where = f" · run {report.run_id}" if report.run_id else ""
    out: list[RenderableType] = [Text.assemble(("gpuscope memory ", "bold"), f"{report.kind} {report.source}{where}")]
    if not report.devices:
        out.append(Text("No GPU memory was recorded.", style="yellow"))
    for device in report.devices:
        out += _device(device, report)
    out += [Text(f"warning: {w}", style="yellow") for w in report.warnings]
    return out


def device_name(d: DeviceMemory) -> str:
    return f"GPU {d.device}" + (f" of rank {d.rank}" if d.rank is not None else "")


def peak_line(d: DeviceMemory) -> str:
    """The one line a device's peak reads as, in every view."""
    if d.peak_allocated_bytes is None:
        return "no allocations recorded"
    rel = "" if d.absolute else " above the trace's start (a lower bound: what was live before it is unknown)"
    when = "" if d.peak_time_us is None else " at " + datetime.fromtimestamp(d.peak_time_us / 1e6, tz=UTC).strftime(
        "%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    size = f" of {gib(d.device_bytes)} ({pct(d.peak_allocated_bytes / d.device_bytes)})" if d.device_bytes and \
        d.absolute else ""
    return f"peak allocated {gib(d.peak_allocated_bytes)}{size}{rel}{when}; most reserved {gib(d.peak_reserved_bytes)}"


def _device(d: DeviceMemory, report: MemoryReport) -> list[RenderableType]:
    head: list[RenderableType] = [Text(peak_line(d))]
    if d.device_bytes is not None:
        head.append(Text(f"device memory {gib(d.device_bytes)} ({d.device_bytes_source or 'source unknown'}); "
                         f"headroom {gib(d.headroom_bytes)}"))
    else:
        head.append(Text("device memory unknown: give --gpu MODEL or --device-gib N for headroom and the batch "
                         "that fits", style="dim"))
    if d.start_allocated_bytes is not None:
        head.append(Text(f"live when the recording began: {gib(d.start_allocated_bytes)}", style="dim"))
    f = d.fragmentation
    if f.reserved_unallocated_bytes is not None:
        head.append(Text(f"reserved but not allocated at the peak: {gib(f.reserved_unallocated_bytes)} "
                         f"({pct(f.share_of_reserved)} of reserved); largest free block "
                         f"{gib(f.largest_free_block_bytes)}"))
    out: list[RenderableType] = [Panel(Group(*head), title=device_name(d), border_style="cyan")]
    if d.makeup and any(m.bytes for m in d.makeup):
        makeup = Table(title="What it held at the peak", header_style="bold", box=None)
        for col in ("category", "memory", "share"):
            makeup.add_column(col, justify="left" if col == "category" else "right")
        for m in d.makeup:
            if m.bytes:
                makeup.add_row(m.category.replace("_", " "), gib(m.bytes), pct(m.share))
        out.append(makeup)
    if d.at_peak:
        out.append(_groups("Largest allocations live at the peak, by where they were made", d.at_peak))
    for o in d.oom:
        out.append(Text(f"out of memory: {gib(o.requested_bytes)} requested with {gib(o.allocated_bytes)} "
                        f"allocated and {gib(o.device_free_bytes)} free on the device", style="red"))
        if o.live:
            out.append(_groups("Live when it ran out", o.live))
    out += [_advice(a, report) for a in d.advice]
    return out


def _groups(title: str, groups: tuple[PeakGroup, ...]) -> Table:
    table = Table(title=title, header_style="bold", box=None)
    for col in ("memory", "count", "category", "where"):
        table.add_column(col, justify="right" if col in ("memory", "count") else "left")
    for g in groups[:GROUPS_SHOWN]:
        table.add_row(gib(g.bytes), f"{g.count:,}", g.category.replace("_", " "), _where(g))
    return table


def _where(g: PeakGroup) -> Text:
    text = Text(g.label)
    frames = [f for f in g.frames or () if ".py" in f.filename][1:FRAMES_SHOWN + 1]  # the first: in the label
    for f in frames:
        text.append(f"\n  < {f.name} ({short_path(f.filename)}:{f.line})", style="dim")
    if g.op is not None and g.label != g.op:
        text.append(f"\n  in {g.op}", style="dim")
    return text


def short_path(filename: str, parts: int = 2) -> str:
    """A source file's last ``parts`` path components: enough to find it, short enough for a table."""
    return "/".join(filename.replace("\\", "/").rsplit("/", parts)[-parts:])


def priced_text(a: MemoryAdvice, report: MemoryReport) -> str:
    """What a piece of advice saves (or costs), as every view says it; its basis where it is not priced."""
    if a.est_saving_fraction is None:
        return a.basis
    verb = "saves" if a.est_saving_fraction >= 0 else "costs"
    money = (f", {usd(abs(a.est_saving_usd))} over {report.job_hours:g} hours per GPU"
             if a.est_saving_usd is not None and report.job_hours else "")
    return f"{verb} about {pct(abs(a.est_saving_fraction))} of the GPU-hours{money} (estimate: {a.basis})"


def _advice(a: MemoryAdvice, report: MemoryReport) -> Text:
    text = Text.assemble(("▸ ", "bold"), (a.title, "bold"), f"\n  {a.detail}")
    style = "dim" if a.est_saving_fraction is None else "green" if a.est_saving_fraction >= 0 else "yellow"
    text.append(f"\n  {priced_text(a, report)}", style=style)
    return text
