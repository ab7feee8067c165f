"""`gpuscope attach PID`: sample a running process tree live, save the run, print the report.

The recording itself (``record_live``) is shared with `gpuscope run`: set up the collectors that can
work here (NVML, DCGM, host, py-spy), drive them with the sampling loop under a live terminal view,
then analyse the saved run exactly as `gpuscope show` would.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Annotated, Any

import psutil
import typer
from rich.live import Live

from gpuscope.analyzers.report import build_report
from gpuscope.cli.common import (
    JobHoursOption,
    JobStepsOption,
    SaveOption,
    fail,
    run_store,
    stderr,
    warn,
    write_json,
)
from gpuscope.cli.live_view import LiveView
from gpuscope.cli.prices import analysis_options
from gpuscope.collectors.base import Sampler
from gpuscope.collectors.host import HostSampler
from gpuscope.collectors.sampler import DEFAULT_INTERVAL_S, SamplingLoop, Tick
from gpuscope.collectors.stacks import EVERY_S, StackSampler
from gpuscope.model.codec import to_json
from gpuscope.model.report import Report
from gpuscope.model.run import GpuInfo, RunKind, RunMeta
from gpuscope.reports.terminal import render
from gpuscope.store import Store, new_run_id
from gpuscope.traces import TraceError, read_trace

DEFAULT_STACK_INTERVAL_S = EVERY_S
DCGM_DEFAULT_URL = "localhost:9400"
DCGM_TIMEOUT_S = 0.5
TRACE_GLOB = "*.pt.trace.json*"


@dataclass(frozen=True)
class LiveOptions:
    """What `attach` and `run` share on their command lines."""

    duration_s: float | None = None
    interval_s: float = DEFAULT_INTERVAL_S
    stack_interval_s: float = DEFAULT_STACK_INTERVAL_S
    stacks: bool = True
    dcgm_url: str | None = None
    name: str | None = None
    json_out: bool = False
    usd_per_gpu_hour: float | None = None
    job_hours: float | None = None
    job_steps: int | None = None
    save: bool = True


# Options `attach` and `run` share.
IntervalOption = Annotated[float, typer.Option("--interval", min=0.01, help="Seconds between samples.")]
StackIntervalOption = Annotated[float, typer.Option("--stack-interval", min=0.01,
                                                    help="Seconds between Python stack dumps (py-spy).")]
NoStacksOption = Annotated[bool, typer.Option("--no-stacks", help="Do not take Python stacks with py-spy.")]
DcgmOption = Annotated[str | None, typer.Option("--dcgm", help="dcgm-exporter endpoint, e.g. gpu-node:9400"
                                                " (default: localhost:9400 when it answers).")]
UsdPerGpuHourOption = Annotated[float | None, typer.Option("--usd-per-gpu-hour", min=0.0,
                                                          help="Price per GPU-hour, over the catalog's.")]


def register(app: typer.Typer) -> None:
    app.command("attach")(attach)


def attach(
    pid: int = typer.Argument(..., help="The process to follow (its child processes are followed too)."),
    duration: float | None = typer.Option(None, "--duration", min=0.0,
                                          help="Seconds to sample (default: until Ctrl-C or the process exits)."),
    interval: IntervalOption = DEFAULT_INTERVAL_S,
    stack_interval: StackIntervalOption = DEFAULT_STACK_INTERVAL_S,
    no_stacks: NoStacksOption = False,
    dcgm: DcgmOption = None,
    name: str | None = typer.Option(None, "--name", help="Name of the saved run (default: the command)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
    usd_per_gpu_hour: UsdPerGpuHourOption = None,
    job_hours: JobHoursOption = None,
    job_steps: JobStepsOption = None,
    save: SaveOption = True,
) -> None:
    """Sample a running training or inference process live, then print its report."""
    try:
        proc = psutil.Process(pid)
        command = tuple(proc.cmdline()) or (proc.name(),)
    except psutil.NoSuchProcess:
        fail(f"no process with pid {pid}")
    except psutil.AccessDenied:
        command = ()
    options = LiveOptions(duration_s=duration, interval_s=interval, stack_interval_s=stack_interval,
                          stacks=not no_stacks, dcgm_url=dcgm, name=name, json_out=json_out,
                          usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps, save=save)
    with run_store(save=save) as store:
        report = record_live(store, pid=pid, kind="attach", command=command, options=options)
    print_report(report, options)


def record_live(store: Store, *, pid: int, kind: RunKind, command: tuple[str, ...], options: LiveOptions,
                run_id: str | None = None, alive: Callable[[], bool] | None = None, probe_stacks: bool = True,
                started_ns: int | None = None) -> Report:
    """Record the process tree of ``pid`` into a new run until the duration, Ctrl-C or its exit; return the report.

    ``alive`` overrides how the target's exit is noticed (`run` polls its own child). With
    ``probe_stacks`` a first py-spy dump tells early whether stacks can be had.
    """
    host = HostSampler(pid)
    host.tree()
    visible = _visible_devices(pid)
    samplers: list[Sampler] = [host]
    nvml = _open_nvml(host.pids)
    if nvml is not None:
        samplers.append(nvml)
    dcgm = _open_dcgm(options.dcgm_url)
    if dcgm is not None:
        samplers.append(dcgm)
    stacks = _open_stacks(host, options, probe=probe_stacks)
    meta = RunMeta(id=run_id or new_run_id(), name=options.name or _default_name(command, pid), kind=kind,
                   status="running", started_ns=started_ns or time.time_ns(), host=socket.gethostname(),
                   command=command, pid=pid, gpus=nvml.gpus() if nvml is not None else ())
    store.create_run(meta)
    view = LiveView(title=f"gpuscope {kind} · pid {pid}", pid=pid, trainers=host.trainers)

    def on_tick(tick: Tick) -> None:
        host.observe(tick.rows)
        view.update(tick)

    loop = SamplingLoop(store, meta.id, samplers, stacks=stacks, interval_s=options.interval_s,
                        duration_s=options.duration_s, target_alive=alive or (lambda: host.target_alive),
                        on_tick=on_tick, on_error=warn)
    live: Any = (Live(view, console=stderr, refresh_per_second=4, transient=True) if stderr.is_terminal
                 else nullcontext())
    with live:
        result = loop.run()
    if stacks is not None:
        for problem in stacks.take_problems():
            warn(problem.message)
    if result.status == "target_exited" and not options.json_out:
        stderr.print(f"[dim]pid {pid} exited; sampling stopped[/dim]")
    if nvml is not None:
        store.update_run(meta.id, gpus=_used_gpus(nvml.gpus(), nvml.target_gpus()))
    elif dcgm is not None and getattr(dcgm, "devices", None):
        store.update_run(meta.id, gpus=_dcgm_gpus(dcgm.devices.values(), visible))
    warnings = _import_traces(store, meta.id)
    run = store.load_run(meta.id)
    report = build_report(run, analysis_options(run.meta, usd_per_gpu_hour=options.usd_per_gpu_hour,
                                                job_hours=options.job_hours, job_steps=options.job_steps),
                          warnings=warnings)
    store.save_report(meta.id, report)
    return report


def print_report(report: Report, options: LiveOptions) -> None:
    if options.json_out:
        write_json(to_json(report))
        return
    render(report)
    if options.save:
        stderr.print(f"[dim]saved as run {report.run.id} (gpuscope show {report.run.id})[/dim]")


def _open_nvml(pids: Callable[[], set[int]]) -> Any | None:
    try:
        from gpuscope.collectors.nvml import NvmlSampler, NvmlUnavailable
    except ImportError:
        return None
    try:
        return NvmlSampler.open(pids=pids)
    except NvmlUnavailable as exc:
        warn(str(exc))
        return None


def _open_dcgm(url: str | None) -> Any | None:
    """``--dcgm URL``: use it, or say in one line why not and go on. Without it, localhost:9400 if it answers."""
    try:
        from gpuscope.collectors.dcgm import DcgmSampler
    except ImportError:
        return None
    problem = DcgmSampler.probe(url or DCGM_DEFAULT_URL, DCGM_TIMEOUT_S)
    if problem is None:
        return DcgmSampler(url or DCGM_DEFAULT_URL, timeout_s=DCGM_TIMEOUT_S)
    if url is not None:
        warn(f"{problem}; going on without DCGM")
    return None


def _open_stacks(host: HostSampler, options: LiveOptions, *, probe: bool) -> StackSampler | None:
    if not options.stacks:
        return None
    stacks = StackSampler(host.stack_pids, roots=host.trainers, every_s=options.stack_interval_s,
                          on_dump=host.roles.note_stacks)
    for missing in stacks.take_problems():
        warn(missing.message)
    first = host.trainers()[0]
    problem = stacks.check(first) if probe and stacks.enabled else None
    if problem is not None:
        warn(problem.message if problem.kind != "not_python" else
             f"pid {first} is not a Python process: no stack samples from it")
    return stacks if stacks.enabled else None


def _used_gpus(all_gpus: tuple[GpuInfo, ...], used: set[int]) -> tuple[GpuInfo, ...]:
    """The GPUs the target held memory on; all of them when NVML could not tell (no process rows)."""
    chosen = tuple(g for g in all_gpus if g.index in used)
    return chosen or all_gpus


def _visible_devices(pid: int) -> set[str] | None:
    """The target's CUDA_VISIBLE_DEVICES entries (indices or GPU-/MIG- UUIDs); None when unset or unreadable."""
    try:
        value = psutil.Process(pid).environ().get("CUDA_VISIBLE_DEVICES")
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        return None
    return None if value is None else {v.strip() for v in value.split(",") if v.strip()}


def _dcgm_gpus(devices: Iterable[Any], visible: set[str] | None) -> tuple[GpuInfo, ...]:
    """Without NVML, the run's GPUs from DCGM's labels: those the target's CUDA_VISIBLE_DEVICES names
    (by index or UUID), else every GPU the endpoint reports. CUDA numbers devices fastest first unless
    CUDA_DEVICE_ORDER=PCI_BUS_ID, so an index there is the usual match, not a certain one; a UUID is."""
    def wanted(d: Any) -> bool:
        return visible is None or str(d.parent) in visible or (d.uuid is not None and d.uuid in visible)

    return tuple(GpuInfo(index=d.gpu, name=d.model, uuid=d.uuid)
                 for d in sorted(devices, key=lambda d: d.gpu) if wanted(d))


def _import_traces(store: Store, run_id: str) -> tuple[str, ...]:
    """Kineto traces that ``gpuscope.torch`` wrote into the run's folder become the run's ranks."""
    folder = store.run_dir(run_id)
    newest: dict[str, Any] = {}
    for path in sorted(folder.glob(TRACE_GLOB), key=lambda p: p.stat().st_mtime):
        newest[path.name.split(".", 1)[0]] = path  # rank0.<time>.pt.trace.json: keep each rank's last
    traces, warnings = [], []
    for path in newest.values():
        try:
            traces.append(read_trace(path))
        except TraceError as exc:
            warnings.append(f"skipped {exc}")
    if traces:
        store.save_traces(run_id, traces)
    return tuple(warnings)


def _default_name(command: tuple[str, ...], pid: int) -> str:
    words = [w for w in command if not w.startswith("-")]
    script = next((w for w in words[1:] if w.endswith(".py")), None)
    return (script or (words[0] if words else f"pid {pid}")).rsplit("/", 1)[-1]

