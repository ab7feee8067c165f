"""Recording a live process tree into a run: open the collectors that can work here (NVML, DCGM, host, py-spy),
drive them with the sampling loop, then analyse the saved run exactly as ``gpuscope show`` would. Shared by
``gpuscope attach``/``gpuscope run`` (which add the live terminal view) and ``gpuscope.record``."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

import psutil

from gpuscope.analyzers.report import build_report
from gpuscope.api.analysis import options_for
from gpuscope.api.errors import GpuscopeError
from gpuscope.collectors.base import Sampler
from gpuscope.collectors.container import container_of
from gpuscope.collectors.host import HostSampler
from gpuscope.collectors.sampler import DEFAULT_INTERVAL_S, SamplingLoop, Tick
from gpuscope.collectors.stacks import EVERY_S, StackSampler
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.report import Report
from gpuscope.model.run import RunKind, RunMeta
from gpuscope.model.schema import split_gpu
from gpuscope.store import Store, StoreWriteError, new_run_id
from gpuscope.traces import TraceError, load_files

DEFAULT_STACK_INTERVAL_S = EVERY_S
DCGM_DEFAULT_URL = "localhost:9400"
DCGM_TIMEOUT_S = 0.5
TRACE_GLOB = "*.pt.trace.json*"


@dataclass(frozen=True)
class LiveOptions:
    """How a live recording runs: what `attach` and `run` share on their command lines."""

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
    target_mfu: float | None = None
    serving_url: str | None = None
    """An inference server's metrics endpoint (vLLM, SGLang, TGI) to scrape each tick (``--serving-metrics``)."""



View = Callable[[HostSampler, RunKind, int], AbstractContextManager[Callable[[Tick], None]]]
"""Shows the ticks of a recording: given the host sampler, the run's kind and the pid, a context in which each
tick is handed to the callable it yields."""


def _ignore(_line: str) -> None:
    return None


def _ignore_tick(_tick: Tick) -> None:
    return None


def record_live(store: Store, *, pid: int, kind: RunKind, command: tuple[str, ...], options: LiveOptions,
                run_id: str | None = None, alive: Callable[[], bool] | None = None, probe_stacks: bool = True,
                started_ns: int | None = None, view: View | None = None,
                warn: Callable[[str], None] = _ignore, note: Callable[[str], None] = _ignore) -> Report:
    """Record the process tree of ``pid`` into a new run until the duration, Ctrl-C or its exit; return the report.

    ``alive`` overrides how the target's exit is noticed (`run` polls its own child). With
    ``probe_stacks`` a first py-spy dump tells early whether stacks can be had. ``view`` shows the ticks as they
    come (the terminal's live view); ``warn`` gets what went wrong but did not stop the recording (one line each),
    ``note`` what a user may want to know.
    """
    host = HostSampler(pid)
    host.tree()
    visible = _visible_devices(pid)
    samplers: list[Sampler] = [host]
    nvml = _open_nvml(host.pids, warn)
    if nvml is not None:
        samplers.append(nvml)
    dcgm = _open_dcgm(options.dcgm_url)
    if dcgm is not None:
        samplers.append(dcgm)
    stacks = _open_stacks(host, options, warn, probe=probe_stacks)
    serving = _open_serving(options.serving_url)
    if serving is not None:
        samplers.append(serving)
    meta = RunMeta(id=run_id or new_run_id(), name=options.name or _default_name(command, pid), kind=kind,
                   status="running", started_ns=started_ns or time.time_ns(), host=socket.gethostname(),
                   command=command, pid=pid, gpus=nvml.gpus() if nvml is not None else (),
                   tags={**_container_tags(pid), **_serving_tags(serving)})
    store.create_run(meta)
    shown = view(host, kind, pid) if view is not None else nullcontext(_ignore_tick)
    with shown as show:
        def on_tick(tick: Tick) -> None:
            host.observe(tick.rows)
            show(tick)

        loop = SamplingLoop(store, meta.id, samplers, stacks=stacks, interval_s=options.interval_s,
                            duration_s=options.duration_s, target_alive=alive or (lambda: host.target_alive),
                            on_tick=on_tick, on_error=warn, close_run=False)
        result = loop.run()
    if result.save_error is not None:  # what was flushed before stays; the run is found interrupted
        raise StoreWriteError(result.save_error)
    if stacks is not None:
        for problem in stacks.take_problems():
            warn(problem.message)
    if result.status == "target_exited" and not options.json_out:
        note(f"pid {pid} exited; sampling stopped")
    if nvml is not None:
        store.update_run(meta.id, gpus=_used_gpus(nvml.gpus(), nvml.target_gpus()))
    elif dcgm is not None and getattr(dcgm, "devices", None):
        store.update_run(meta.id, gpus=_dcgm_gpus(dcgm.devices.values(), visible))
    for line in _dcgm_gaps(dcgm):
        warn(line)
    if serving is not None and serving.engine is not None:
        store.update_run(meta.id, tags={**meta.tags, **_serving_tags(serving)})
    warnings = (*_import_traces(store, meta.id), *_dcgm_gaps(dcgm), *_serving_gaps(serving))
    run = store.load_run(meta.id)
    run = replace(run, meta=replace(run.meta, status=result.status, ended_ns=result.ended_ns))
    report = build_report(run, options_for(run.meta, usd_per_gpu_hour=options.usd_per_gpu_hour,
                                           job_hours=options.job_hours, job_steps=options.job_steps,
                                           target_mfu=options.target_mfu),
                          warnings=warnings)
    # The status is saved with the report, in one transaction: a recording cut off before (kill -9 while it
    # is analysed) stays `running` with a dead writer, and is found `interrupted` with all its samples.
    store.save_report(meta.id, report, status=result.status, ended_ns=result.ended_ns)
    return report


def _open_nvml(pids: Callable[[], set[int]], warn: Callable[[str], None]) -> Any | None:
    try:
        from gpuscope.collectors.nvml import NvmlSampler, NvmlUnavailable
    except ImportError:
        return None
    try:
        sampler = NvmlSampler.open(pids=pids)
    except NvmlUnavailable as exc:
        warn(str(exc))
        return None
    if sampler.pid_problem is not None:
        warn(sampler.pid_problem)
    return sampler


def check_dcgm(url: str | None) -> None:
    """``--dcgm URL`` given: one scrape now, and ``GpuscopeError`` (one line) unless it gives DCGM samples, so that
    a wrong or dead endpoint is told before anything is launched or recorded. Call it before ``record_live``;
    outages after that are gaps in the recording."""
    if url is None:
        return
    from gpuscope.collectors.dcgm import DcgmSampler

    problem = DcgmSampler.probe(url, DCGM_TIMEOUT_S)
    if problem is not None:
        raise GpuscopeError(f"{problem}; check --dcgm, or leave it out to record without DCGM")


def check_serving(url: str | None) -> None:
    """``--serving-metrics URL`` given: one scrape now, and ``GpuscopeError`` (one line) unless it gives vLLM, SGLang
    or TGI metrics, before anything is launched or recorded; outages after that are gaps."""
    if url is None:
        return
    from gpuscope.collectors.serving import ServingSampler

    problem = ServingSampler.probe(url, DCGM_TIMEOUT_S)
    if problem is not None:
        raise GpuscopeError(f"{problem}; check --serving-metrics")


def _open_serving(url: str | None) -> Any | None:
    from gpuscope.collectors.serving import ServingSampler

    return ServingSampler(url, timeout_s=DCGM_TIMEOUT_S) if url is not None else None


def _serving_tags(serving: Any | None) -> dict[str, str]:
    """The endpoint (without credentials) and the engine it spoke for, as the run's tags."""
    if serving is None:
        return {}
    from gpuscope.analyzers.serving.report import ENGINE_TAG, URL_TAG

    return {URL_TAG: serving.url, **({ENGINE_TAG: serving.engine} if serving.engine else {})}


def _serving_gaps(serving: Any | None) -> tuple[str, ...]:
    """The scrapes that gave nothing, were cut at their time limit, or had series that could not be read."""
    return tuple(serving.warnings()) if serving is not None else ()


def _open_dcgm(url: str | None) -> Any | None:
    """``--dcgm URL`` (checked by ``check_dcgm``): scraped every tick, an outage a gap. Without it, localhost:9400
    if it answers now."""
    from gpuscope.collectors.dcgm import DcgmSampler

    if url is not None:
        return DcgmSampler(url, timeout_s=DCGM_TIMEOUT_S)
    if DcgmSampler.probe(DCGM_DEFAULT_URL, DCGM_TIMEOUT_S) is None:
        return DcgmSampler(DCGM_DEFAULT_URL, timeout_s=DCGM_TIMEOUT_S)
    return None


def _dcgm_gaps(dcgm: Any | None) -> tuple[str, ...]:
    """One line when scrapes failed during the recording: those ticks have no DCGM samples (unknown, not 0)."""
    if dcgm is None or not dcgm.gaps:
        return ()
    return (f"{dcgm.gaps} DCGM scrape{'s' if dcgm.gaps > 1 else ''} gave nothing, so DCGM counters have gaps "
            f"there (the last: {dcgm.last_error})",)


def _open_stacks(host: HostSampler, options: LiveOptions, warn: Callable[[str], None], *,
                 probe: bool) -> StackSampler | None:
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


def _container_tags(pid: int) -> dict[str, str]:
    """The container and pod the target runs in, as the run's tags (none outside a container)."""
    found = container_of(pid)
    return found.tags() if found is not None else {}


def _used_gpus(all_gpus: tuple[GpuInfo, ...], used: set[int]) -> tuple[GpuInfo, ...]:
    """The GPUs the target held memory on; when NVML could not tell (no process rows), all of them, a GPU in MIG
    mode as its instances (never both: that would count it twice)."""
    chosen = tuple(g for g in all_gpus if g.index in used)
    if chosen:
        return chosen
    parents = {split_gpu(g.index)[0] for g in all_gpus if g.mig_profile is not None}
    return tuple(g for g in all_gpus if g.mig_profile is not None or g.index not in parents)


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

    return tuple(GpuInfo(index=d.gpu, name=d.model, uuid=d.uuid, mig_profile=d.mig_profile)
                 for d in sorted(devices, key=lambda d: d.gpu) if wanted(d))


def _import_traces(store: Store, run_id: str) -> tuple[str, ...]:
    """Kineto traces that ``gpuscope.torch`` wrote into the run's folder become the run's ranks, by the rules
    ``gpuscope analyze`` reads a folder with (``traces.load_files``): several profiler cycles of one rank are one
    rank, the latest analysed; rank ids are never reassigned in silence. What cannot be read is told, and the
    recorded samples are kept whatever the traces hold."""
    folder = store.run_dir(run_id)
    files = sorted(folder.glob(TRACE_GLOB))
    if not files:
        return ()
    try:
        loaded = load_files(files, where=folder)
    except TraceError as exc:
        return (f"skipped the profiler traces: {exc}",)
    if loaded.traces:
        store.save_traces(run_id, loaded.traces)
    return (*(f"skipped {e}" for e in loaded.errors), *loaded.warnings)


def _default_name(command: tuple[str, ...], pid: int) -> str:
    words = [w for w in command if not w.startswith("-")]
    script = next((w for w in words[1:] if w.endswith(".py")), None)
    return (script or (words[0] if words else f"pid {pid}")).rsplit("/", 1)[-1]

