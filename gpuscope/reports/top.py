"""`gpuscope top`'s frame (rich): the node's GPUs, then every GPU process, each with its cost per hour and so far.

Users, command lines and container names are the processes' own words: they go in as ``Text`` (never markup),
made ``printable``, URLs in command lines without their credentials.
"""

from __future__ import annotations

import time

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gpuscope.format import command_line, container_line, gib, pct, printable, usd
from gpuscope.model.node import GpuNow, NodeSnapshot, ProcessNow, RunningCost

NA = "n/a"


def frame(snapshot: NodeSnapshot, cost: RunningCost) -> RenderableType:
    """One screen: a header line with the node's cost, the GPUs, the processes."""
    parts: list[RenderableType] = [_header(snapshot, cost), _gpus(snapshot.gpus, cost)]
    if snapshot.problem:
        parts.append(Text(printable(snapshot.problem), style="yellow"))
    parts.append(Text(""))
    parts.append(_processes(snapshot.processes, cost) if snapshot.processes
                 else Text("No GPU processes running.", style="dim"))
    return Group(*parts)


def _header(snapshot: NodeSnapshot, cost: RunningCost) -> Text:
    seconds = (cost.until_ns - cost.since_ns) / 1e9
    priced = [g.usd_per_hour for g in snapshot.gpus if g.mig_profile is None and g.usd_per_hour is not None]
    rate = f" ({usd(sum(priced))}/h)" if priced else ""
    when = time.strftime("%H:%M:%S", time.localtime(snapshot.ts_ns / 1e9))
    return Text.assemble(("gpuscope top", "bold"), f" · {printable(snapshot.host)} · {when} · ",
                         ("cost so far ", "bold"),
                         f"{usd(cost.total_usd)}{rate} over {seconds:.1f} s" if seconds < 10 else
                         f"{usd(cost.total_usd)}{rate} over {seconds:,.0f} s")


def _gpus(gpus: tuple[GpuNow, ...], cost: RunningCost) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("GPU", "name", "util", "memory", "power", "$/h", "so far"):
        table.add_column(column, justify="left" if column == "name" else "right",
                         overflow="ellipsis" if column == "name" else "fold", no_wrap=column == "name")
    for g in gpus:
        name = printable(g.name or "unknown GPU") + (f" MIG {printable(g.mig_profile)}" if g.mig_profile else "")
        memory = f"{gib(g.memory_used_bytes)} / {gib(g.memory_total_bytes)}" \
            if g.memory_used_bytes is not None else NA
        power = f"{g.power_w:.0f} / {g.power_limit_w:.0f} W" if g.power_w is not None and g.power_limit_w \
            else (f"{g.power_w:.0f} W" if g.power_w is not None else NA)
        so_far = cost.gpu_usd.get(g.index)
        table.add_row(str(g.index), Text(name), pct(g.util, 0), memory, power,
                      usd(g.usd_per_hour) if g.usd_per_hour is not None else NA,
                      usd(so_far) if so_far is not None else NA)
    return table


def _processes(procs: tuple[ProcessNow, ...], cost: RunningCost) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("GPU", "pid", "user", "SM", "memory", "$/h", "so far", "command"):
        table.add_column(column, justify="left" if column in ("user", "command") else "right",
                         overflow="fold", ratio=1 if column == "command" else None)
    for p in procs:
        key = (p.gpu, p.pid)
        per_hour, so_far = cost.process_usd_per_hour.get(key), cost.process_usd.get(key)
        command = printable(command_line(p.command)) if p.command else NA
        where = container_line(p.container)
        if where:
            command += f" ({printable(where)})"
        table.add_row(str(p.gpu), str(p.pid), Text(printable(p.user) if p.user else NA), pct(p.sm_share, 0),
                      gib(p.memory_bytes) if p.memory_bytes is not None else NA,
                      usd(per_hour) if per_hour is not None else NA, usd(so_far) if so_far is not None else NA,
                      Text(command))
    return table
