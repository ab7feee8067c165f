"""What filled the GPUs' memory at the peak (``gpuscope memory PATH``): from a memory snapshot, a profiler trace
with memory events, or a saved run.

    >>> from gpuscope.api.memory import memory
    >>> report = memory("sample_traces/h200/pageable_h2d", save=False)
    >>> report.devices[0].peak_allocated_bytes > 0
    True
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpuscope.analyzers.memory import MemoryOptions, snapshot_memory, trace_memory
from gpuscope.api.analysis import analyze_path, remote_timeouts, user_errors
from gpuscope.api.errors import GpuscopeError
from gpuscope.model.gpu_spec import GpuSpec
from gpuscope.model.memory import MemoryReport
from gpuscope.model.redact import bare_url
from gpuscope.model.report import Report
from gpuscope.model.run import RunMeta
from gpuscope.model.trace import RankTrace
from gpuscope.pricing import first_gpu_model, load_catalog, resolve_price
from gpuscope.specs import load_specs, lookup_gpu
from gpuscope.store import Store, StoreError
from gpuscope.store.memory_runs import load_memory_report, load_snapshot, save_memory_report, save_memory_run
from gpuscope.traces import is_url, load
from gpuscope.traces.snapshot import read_snapshot

SNAPSHOT_SUFFIXES = (".pickle", ".pkl", ".pickle.gz", ".pkl.gz")
GIB = 2**30


@dataclass(frozen=True)
class MemoryInputs:
    """What the recording may not say, from the command line: the GPU (its size and price), the job."""

    gpu: str | None = None
    """The GPU it ran on, as a device, the spec table or the price catalog names it ("NVIDIA H100 80GB HBM3",
    "H100 SXM", "A100 80GB"): its memory as the driver reports it, and its price. A name that could be more
    than one model ("H100") is refused with the choices."""
    device_gib: float | None = None
    usd_per_gpu_hour: float | None = None
    job_hours: float | None = None
    fixed_step_share: float | None = None
    """For a snapshot: the share of the job's step that does not grow with the batch (launch and host overhead,
    exposed communication: ``gpuscope analyze``'s stage shares of the same job), which prices a larger batch."""
    world_size: int | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.gpu, self.device_gib, self.usd_per_gpu_hour, self.job_hours,
                                           self.fixed_step_share, self.world_size))


def memory(target: str | os.PathLike[str], inputs: MemoryInputs = MemoryInputs(), *, save: bool = True,
           store: Store | None = None, name: str | None = None, reanalyze: bool = False,
           timeout_s: float | None = None) -> MemoryReport:
    """The memory report of ``target``: a snapshot file (``torch.cuda.memory._dump_snapshot``), a trace file or
    folder of ranks (or an fsspec URL of either), or a saved run's id. A snapshot is saved as a run of kind
    "memory" and a trace analysed and saved as ``gpuscope analyze`` does, unless ``save`` is False. ``timeout_s``
    is one deadline for reading a trace, as ``gpuscope.api.analysis.analyze`` has it (300 s by default for a URL).
    Raises ``GpuscopeError`` (one line, secrets masked) for what cannot be read, a pickle that would run code
    included (refused before any of it runs)."""
    _check(inputs)
    text = str(target)
    path = Path(text)
    if not is_url(text) and path.is_symlink() and not path.exists():  # a loop, or a link to nothing
        try:
            path.stat()
        except OSError as exc:
            raise GpuscopeError(f"{text}: cannot read: {exc.strerror or exc}") from None
    if not is_url(text) and path.exists():
        if is_snapshot(path):
            return _snapshot(path, inputs, save=save, store=store, name=name)
        return _trace(path, inputs, save=save, store=store, name=name, timeout_s=timeout_s)
    if is_url(text):
        return _trace(text, inputs, save=save, store=store, name=name, timeout_s=timeout_s)
    return _saved(text, inputs, store=store, reanalyze=reanalyze)


def is_snapshot(path: Path) -> bool:
    """A file named like a pickle, or whose content (gunzipped) starts as a pickle of protocol 2 or later does."""
    if path.is_dir():
        return False
    if path.name.lower().endswith(SNAPSHOT_SUFFIXES):
        return True
    try:
        with path.open("rb") as f:
            head = f.read(2)
            if head == b"\x1f\x8b":
                f.seek(0)
                head = gzip.GzipFile(fileobj=f).read(1)
    except (OSError, EOFError, gzip.BadGzipFile):
        return False
    return head[:1] == b"\x80"


def _check(inputs: MemoryInputs) -> None:
    for label, value in (("--device-gib", inputs.device_gib), ("--usd-per-gpu-hour", inputs.usd_per_gpu_hour),
                         ("--job-hours", inputs.job_hours)):
        if value is not None and not value >= 0:
            raise GpuscopeError(f"{label} must be 0 or more, not {value}")
    if inputs.fixed_step_share is not None and not 0 <= inputs.fixed_step_share <= 1:
        raise GpuscopeError(f"--fixed-step-share is a share from 0 to 1, not {inputs.fixed_step_share}")
    if inputs.world_size is not None and inputs.world_size < 1:
        raise GpuscopeError(f"--world-size must be 1 or more, not {inputs.world_size}")


def options(inputs: MemoryInputs, *, gpu_model: str | None = None, device_bytes: int | None = None) -> MemoryOptions:
    """The device size, price and job the analysis runs with: what was given over what the recording (or the
    saved run: ``device_bytes``) says."""
    size, source = (device_bytes, "saved with the run") if device_bytes is not None else (None, None)
    if inputs.device_gib is not None:
        size, source = int(inputs.device_gib * GIB), "--device-gib"
    priced_as = inputs.gpu or gpu_model
    if inputs.gpu is not None:
        spec = gpu_spec(inputs.gpu)
        if inputs.device_gib is None:
            size, source = spec.usable_memory
        with user_errors():  # priced as the catalog's entry for that model, so price and size are one GPU's
            priced_as = next((e.model for e in load_catalog().gpus if e.spec == spec.model), inputs.gpu)
    with user_errors():
        price = resolve_price(priced_as, cli_usd_per_gpu_hour=inputs.usd_per_gpu_hour)
    return MemoryOptions(device_bytes=size, device_bytes_source=source, usd_per_gpu_hour=price.usd_per_gpu_hour,
                         price_source=price.source, job_hours=inputs.job_hours,
                         fixed_step_share=inputs.fixed_step_share, world_size=inputs.world_size)


def gpu_spec(gpu: str) -> GpuSpec:
    """The spec-table entry ``--gpu`` names; a GpuscopeError (one line, exit 2) for a name that could be more than
    one model, with the choices, or that no entry knows."""
    with user_errors():
        found = lookup_gpu(gpu, load_specs())
    if found.ambiguous:
        raise GpuscopeError(f"--gpu {gpu!r} could be any of {found.choices_text()}: name one (e.g. --gpu "
                            f"{found.choices[0]!r}), or give the memory with --device-gib")
    if found.found is None:
        raise GpuscopeError(f"--gpu {gpu!r}: not a GPU the spec table knows (see `gpuscope prices`, or add it under "
                            "[gpu_specs] in config.toml); give its memory with --device-gib instead")
    return found.found


def _snapshot(path: Path, inputs: MemoryInputs, *, save: bool, store: Store | None,
              name: str | None) -> MemoryReport:
    with user_errors():
        snap = read_snapshot(path)
    report = snapshot_memory(snap, options(inputs))
    if not save:
        return report
    with _store(store) as kept, user_errors():
        assert kept is not None  # needed: opened
        _, report = save_memory_run(kept, snap, report, name=name or path.name, gpu_model=inputs.gpu)
    return report


def _trace(target: str | Path, inputs: MemoryInputs, *, save: bool, store: Store | None, name: str | None,
           timeout_s: float | None) -> MemoryReport:
    # One deadline for the whole command: the analysis's reading and, when nothing is saved to read back, the
    # second reading of the traces themselves.
    timeouts = remote_timeouts(target, timeout_s=timeout_s)
    with _store(store if save else None, needed=save) as kept:
        analysis, meta = analyze_path(target, name=name, usd_per_gpu_hour=inputs.usd_per_gpu_hour,
                                      job_hours=inputs.job_hours, save=save, store=kept, timeout_s=timeout_s,
                                      timeouts=timeouts)
        with user_errors():
            traces = kept.load_traces(meta.id) if kept is not None else load(target, timeouts=timeouts).traces
    # A URL is named as its files are: without user, password or query (a signed URL's signature included).
    source = bare_url(target) if isinstance(target, str) else str(target)
    return _of_traces(traces, inputs, meta, analysis, source=source, run_id=meta.id if save else None)


def _of_traces(traces: Sequence[RankTrace], inputs: MemoryInputs, meta: RunMeta, analysis: Report | None, *,
               source: str, run_id: str | None) -> MemoryReport:
    return trace_memory(traces, options(inputs, gpu_model=first_gpu_model(meta)), source=source, run_id=run_id,
                        analysis=analysis)


def _saved(run: str, inputs: MemoryInputs, *, store: Store | None, reanalyze: bool) -> MemoryReport:
    with _store(store) as opened, user_errors():
        assert opened is not None
        return _saved_in(opened, run, inputs, reanalyze=reanalyze)


def _saved_in(kept: Store, run: str, inputs: MemoryInputs, *, reanalyze: bool) -> MemoryReport:
    try:
        run_id = kept.resolve(run)
    except StoreError as exc:
        raise GpuscopeError(f"{run}: no such snapshot, trace or folder, and {exc}") from None
    meta = kept.get_meta(run_id)
    if meta.kind == "fleet":
        raise GpuscopeError(f"run {run_id} is a fleet run: it has no memory events")
    if meta.kind == "memory":
        saved = None if reanalyze or inputs.given else load_memory_report(kept, run_id)
        if saved is not None:
            return saved
        sizes = [g.memory_bytes for g in meta.gpus if g.memory_bytes]
        report = snapshot_memory(load_snapshot(kept, run_id), options(inputs, gpu_model=_gpu_of(meta),
                                                                      device_bytes=sizes[0] if sizes else None),
                                 run_id=run_id)
        save_memory_report(kept, run_id, report)
        return report
    traces = kept.load_traces(run_id)
    if not traces:
        raise GpuscopeError(f"run {run_id} has no saved traces, so no memory events to read")
    return _of_traces(traces, inputs, meta, kept.load_report(run_id), source=f"run {run_id}", run_id=run_id)


def memory_of_run(store: Store, run_id: str, inputs: MemoryInputs = MemoryInputs()) -> MemoryReport | None:
    """The memory report of a saved run's traces (for the HTML report and the dashboard); None when they hold no
    GPU memory events."""
    with user_errors():
        traces = store.load_traces(run_id)
        meta = store.get_meta(run_id)
        report = _of_traces(traces, inputs, meta, store.load_report(run_id), source=f"run {run_id}", run_id=run_id)
    return report if report.devices else None


def _gpu_of(meta: RunMeta) -> str | None:
    return next((g.name for g in meta.gpus if g.name), None)


@contextmanager
def _store(store: Store | None, *, needed: bool = True) -> Iterator[Store | None]:
    """The store given, else the default one opened (and closed) here; None when not ``needed``."""
    if store is not None or not needed:
        yield store
        return
    with user_errors():
        opened = Store()
    with opened:
        yield opened
