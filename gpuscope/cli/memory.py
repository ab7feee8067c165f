"""`gpuscope memory PATH`: what filled the GPUs' memory at the peak, what it was made of, and the room left."""

from __future__ import annotations

import typer

from gpuscope.api.memory import MemoryInputs
from gpuscope.api.memory import memory as read_memory
from gpuscope.cli.common import (
    JobHoursOption,
    JsonOption,
    SaveOption,
    TimeoutOption,
    UsdPerGpuHourOption,
    write_json,
)
from gpuscope.model.codec import to_json
from gpuscope.model.memory import MemoryReport
from gpuscope.store import Store


def register(app: typer.Typer) -> None:
    app.command("memory")(memory)


def memory(
    path: str = typer.Argument(..., metavar="PATH", help="A memory snapshot (torch.cuda.memory._dump_snapshot, "
                                                         "optionally gzipped), a trace file or folder of ranks "
                                                         "recorded with profile_memory=True (or an fsspec URL of "
                                                         "either), or a saved run's id."),
    json_out: JsonOption = False,
    gpu: str | None = typer.Option(None, "--gpu", metavar="MODEL",
                                   help="The GPU it ran on, as NVML, the spec table or `gpuscope prices` names it "
                                        "('NVIDIA H100 80GB HBM3', 'H100 SXM', 'A100 80GB'): its memory as the driver "
                                        "reports it, and its price. A name of several models ('H100') is refused."),
    device_gib: float | None = typer.Option(None, "--device-gib", min=0.0, help="The device's memory in GiB."),
    usd_per_gpu_hour: UsdPerGpuHourOption = None,
    job_hours: JobHoursOption = None,
    fixed_step_share: float | None = typer.Option(
        None, "--fixed-step-share", help="For a snapshot: the share of the job's step that does not grow with the "
                                         "batch (host overhead + exposed communication in `gpuscope analyze`), to "
                                         "price a larger batch."),
    world_size: int | None = typer.Option(None, "--world-size", help="Ranks the job runs on (for sharding)."),
    save: SaveOption = True,
    reanalyze: bool = typer.Option(False, "--reanalyze", help="A saved run: analyse its data again."),
    timeout_s: float | None = TimeoutOption,
) -> None:
    """Say what filled the GPUs' memory at the peak, what it was made of, the room left and what to change."""
    inputs = MemoryInputs(gpu=gpu, device_gib=device_gib, usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours,
                          fixed_step_share=fixed_step_share, world_size=world_size)
    emit_memory(read_memory(path, inputs, save=save, reanalyze=reanalyze, timeout_s=timeout_s), json_out=json_out)


def show_memory(run_id: str, *, store: Store, json_out: bool, reanalyze: bool, usd_per_gpu_hour: float | None,
                job_hours: float | None) -> None:
    """`gpuscope show` of a memory run."""
    inputs = MemoryInputs(usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours)
    emit_memory(read_memory(run_id, inputs, store=store, reanalyze=reanalyze), json_out=json_out)


def emit_memory(report: MemoryReport, *, json_out: bool) -> None:
    if json_out:
        write_json(to_json(report))
        return
    from gpuscope.reports.memory import render  # the terminal view: not for --json

    render(report)
