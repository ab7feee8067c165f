"""`gpuscope top`: every GPU and GPU process on this node, refreshed live, with the cost running."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import typer
from rich.live import Live

from gpuscope.cli.common import JsonOption, UsdPerGpuHourOption, fail, stdout, write_json
from gpuscope.format import command_line
from gpuscope.model.codec import to_json
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.node import NodeSnapshot, RunningCost

if TYPE_CHECKING:
    from gpuscope.collectors.node import NodeReader

SCHEMA = "gpuscope.top/1"


def register(app: typer.Typer) -> None:
    app.command("top")(top)


def top(
    once: bool = typer.Option(False, "--once", help="Print one frame and exit (two readings, --interval apart)."),
    json_out: JsonOption = False,
    interval: float = typer.Option(1.0, "--interval", "-n", min=0.05, help="Seconds between frames."),
    usd_per_gpu_hour: UsdPerGpuHourOption = None,
) -> None:
    """Every GPU and GPU process on this node, like nvitop: utilisation, memory, power, and the cost running.

    With --json (which implies --once) the frame is one JSON object."""
    from gpuscope.collectors.node import NodeReader
    from gpuscope.collectors.nvml import NvmlUnavailable

    try:
        reader = NodeReader.open(lambda gpu: _price(gpu, usd_per_gpu_hour))
    except NvmlUnavailable as exc:
        fail(f"top needs an NVIDIA GPU and its driver: {exc.reason}")
    try:
        frames = _frames(reader, interval)
        if once or json_out:
            next(frames)  # the first reading starts the cost and the per-process SM window
            snapshot, cost = next(frames)
            _print_once(snapshot, cost, json_out=json_out)
            return
        _live(frames)
    finally:
        reader.close()


def _price(gpu: GpuInfo, usd_per_gpu_hour: float | None) -> tuple[float | None, str | None]:
    """The GPU's price per hour (a MIG instance: its share of the GPU's), as every other view charges it."""
    from gpuscope.pricing.mig import run_price
    from gpuscope.pricing.resolve import PriceError, resolve_price

    try:
        price = run_price(resolve_price(gpu.name, cli_usd_per_gpu_hour=usd_per_gpu_hour), [gpu])
    except PriceError as exc:
        fail(str(exc))
    return price.usd_per_gpu_hour, price.source


def _frames(reader: NodeReader, interval: float) -> Iterator[tuple[NodeSnapshot, RunningCost]]:
    from gpuscope.analyzers.node_cost import accumulate

    cost: RunningCost | None = None
    while True:
        snapshot = reader.read(time.time_ns())
        cost = accumulate(cost, snapshot)
        yield snapshot, cost
        time.sleep(interval)


def _print_once(snapshot: NodeSnapshot, cost: RunningCost, *, json_out: bool) -> None:
    if json_out:
        write_json(to_json(top_document(snapshot, cost)))
        return
    from gpuscope.reports.top import frame

    stdout.print(frame(snapshot, cost))


def _live(frames: Iterator[tuple[NodeSnapshot, RunningCost]]) -> None:
    from gpuscope.reports.top import frame

    snapshot, cost = next(frames)
    try:
        with Live(frame(snapshot, cost), console=stdout, auto_refresh=False, screen=stdout.is_terminal) as live:
            for snapshot, cost in frames:
                live.update(frame(snapshot, cost), refresh=True)
    except KeyboardInterrupt:  # Ctrl-C is how top ends
        pass


def top_document(snapshot: NodeSnapshot, cost: RunningCost) -> dict[str, object]:
    """The ``--json`` object: the GPUs and processes, each with its cost per hour and so far."""
    processes = [{**_fields(p), "command": command_line(p.command) if p.command else None,
                  "usd_per_hour": cost.process_usd_per_hour.get((p.gpu, p.pid)),
                  "usd": cost.process_usd.get((p.gpu, p.pid))} for p in snapshot.processes]
    gpus = [{**_fields(g), "usd": cost.gpu_usd.get(g.index)} for g in snapshot.gpus]
    return {"schema": SCHEMA, "host": snapshot.host, "ts_ns": snapshot.ts_ns, "since_ns": cost.since_ns,
            "total_usd": cost.total_usd, "problem": snapshot.problem, "gpus": gpus, "processes": processes}


def _fields(record: object) -> dict[str, object]:
    from dataclasses import asdict, is_dataclass

    assert is_dataclass(record) and not isinstance(record, type)
    return asdict(record)
