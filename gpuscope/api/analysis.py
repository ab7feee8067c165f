"""Traces and saved runs through the Python API: ``analyze``, ``load`` and ``runs``."""

from __future__ import annotations

import socket
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from os import PathLike
from pathlib import Path

import numpy as np

from gpuscope.analyzers.report import AnalysisOptions, build_report, run_summary
from gpuscope.analyzers.trace.rank import analyze_rank
from gpuscope.api.errors import GpuscopeError
from gpuscope.api.report import Report
from gpuscope.model.cost import JobSpec
from gpuscope.model.report import Report as AnalysisReport
from gpuscope.model.report import RunSummary
from gpuscope.model.run import GpuInfo, Run, RunMeta
from gpuscope.model.trace import GPU_KINDS, RankTrace
from gpuscope.pricing import CatalogError, PriceError, first_gpu_model, resolve_grid, resolve_price
from gpuscope.pricing.mig import run_price
from gpuscope.store import Store, StoreError, new_run_id
from gpuscope.traces import Loaded, TraceError
from gpuscope.traces import load as load_traces


@contextmanager
def user_errors() -> Iterator[None]:
    """The library's own user-facing errors, raised as the API's one type with the same one-line message."""
    try:
        yield
    except (TraceError, StoreError, PriceError, CatalogError) as exc:
        raise GpuscopeError(str(exc)) from exc


def options_for(meta: RunMeta, *, usd_per_gpu_hour: float | None, job_hours: float | None,
                job_steps: int | None, samples_per_step: int | None = None) -> AnalysisOptions:
    """The price (from the run's first named GPU, then the overrides) and job spec an analysis runs with."""
    for name, value in (("usd_per_gpu_hour", usd_per_gpu_hour), ("job_hours", job_hours), ("job_steps", job_steps),
                        ("samples_per_step", samples_per_step)):
        if value is not None and value < 0:
            raise GpuscopeError(f"{name} must be 0 or more, not {value}")
    with user_errors():
        price = run_price(resolve_price(first_gpu_model(meta), cli_usd_per_gpu_hour=usd_per_gpu_hour), meta.gpus)
        grid = resolve_grid()
    job = JobSpec(job_hours=job_hours, job_steps=job_steps, samples_per_step=samples_per_step or None,
                  grid_kg_co2_per_kwh=grid.kg_co2_per_kwh, grid_source=grid.source)
    return AnalysisOptions(price=price, job=job)


def analyze_loaded(loaded: Loaded, path: Path, *, name: str | None = None, usd_per_gpu_hour: float | None = None,
                   job_hours: float | None = None, job_steps: int | None = None,
                   samples_per_step: int | None = None, save: bool = False) -> tuple[AnalysisReport, RunMeta]:
    """Read traces (``gpuscope.traces.load``) into a run: its catalog entry, its report, saved when asked.
    What ``analyze`` and ``gpuscope analyze`` both run; raises ``GpuscopeError``."""
    if not loaded.traces:
        raise GpuscopeError(f"{path}: none of the {len(loaded.files)} trace files could be read")
    meta = trace_run_meta(loaded.traces, name=name or path.resolve().name)
    options = options_for(meta, usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps,
                          samples_per_step=samples_per_step)
    if options.price is not None:
        meta = replace(meta, price_source=options.price.source)
    run = Run(meta=meta, traces=loaded.traces)
    analysis = build_report(run, options, warnings=(*(f"skipped {e}" for e in loaded.errors), *loaded.warnings),
                            ranks=loaded.per_rank or None)
    # Kept apart from the warnings so a gate can tell a job with a rank missing from a whole one.
    analysis = replace(analysis, unread_rank_files=tuple(str(e) for e in loaded.errors if not e.not_a_trace))
    if job_steps is not None and not any(r.steps for r in analysis.ranks):
        raise GpuscopeError(f"{path}: --job-steps needs profiler steps (ProfilerStep#N) and this trace has none; "
                            "project the cost with --job-hours instead")
    if save:
        with user_errors(), Store() as store:
            store.save_trace_run(meta, run.traces, analysis)
    return analysis, meta


def analyze(path: str | PathLike[str], *, usd_per_gpu_hour: float | None = None, job_hours: float | None = None,
            job_steps: int | None = None, save: bool = False, name: str | None = None,
            jobs: int | None = None) -> Report:
    """Analyse PyTorch profiler (Kineto) traces: one trace file (``.json``, ``.json.gz``) or a directory of
    rank files, as ``gpuscope analyze PATH`` does, with the same numbers.

    ``usd_per_gpu_hour`` overrides the catalog's price; ``job_hours`` or ``job_steps`` project the cost to
    the whole job. With ``save`` the run goes into the store (``GPUSCOPE_HOME``) for ``load``, ``gpuscope
    show`` and the dashboard. Rank files that cannot be read are skipped and named in ``Report.warnings``.
    Raises ``GpuscopeError`` when nothing can be read or a setting is bad.
    """
    trace_path = Path(path)
    with user_errors():
        loaded = load_traces(trace_path, jobs=jobs, per_rank=analyze_rank)
    analysis, _ = analyze_loaded(loaded, trace_path, name=name, usd_per_gpu_hour=usd_per_gpu_hour,
                                 job_hours=job_hours, job_steps=job_steps, save=save)
    return Report(analysis)


def load(run_id: str, *, reanalyze: bool = False) -> Report:
    """A saved run's report (a run id or a unique prefix of one, as ``gpuscope runs`` lists them), with its
    live samples. A run not analysed yet, or with ``reanalyze``, is analysed (and saved) with this version,
    as ``gpuscope show`` does. Raises ``GpuscopeError`` for an unknown id or a fleet run."""
    with user_errors(), Store() as store:
        full_id = store.resolve(run_id)
        meta = store.get_meta(full_id)
        if meta.kind == "fleet":
            raise GpuscopeError(f"run {full_id} is a fleet run: see it with `gpuscope show {full_id}`")
        analysis = None if reanalyze else store.load_report(full_id)
        samples = store.samples(full_id)
        if analysis is None:
            run = store.load_run(full_id)
            if not run.traces and run.samples is None and run.stacks is None:
                raise GpuscopeError(f"run {full_id} has no recorded data to analyse")
            analysis = build_report(run, options_for(meta, usd_per_gpu_hour=None, job_hours=None, job_steps=None))
            store.save_report(full_id, analysis)
    return Report(analysis, samples=samples if len(samples) else None)


def runs() -> list[RunSummary]:
    """The saved runs, newest first: id, kind, name, status, start, duration and GPUs of each. Runs that cannot be
    read (a damaged store or catalog row) are left out, each kind of damage with one ``UserWarning`` line."""
    with user_errors(), Store() as store:
        listing = store.listing()
    for line in listing.problems:
        warnings.warn(line, stacklevel=2)
    return [run_summary(Run(meta=m)) for m in listing.runs]


def trace_run_meta(traces: tuple[RankTrace, ...], *, name: str) -> RunMeta:
    """A trace run's catalog entry: its time span and the GPUs its ranks ran work on (one per rank in most jobs)."""
    starts = [int(t.events.ts_ns.min()) for t in traces if len(t.events)]
    ends = [int(t.events.end_ns.max()) for t in traces if len(t.events)]
    started = min(starts) if starts else time.time_ns()
    return RunMeta(
        id=new_run_id(started), name=name, kind="trace", status="complete", started_ns=started,
        ended_ns=max(ends) if ends else started, host=socket.gethostname(),
        command=tuple(t.source for t in traces), gpus=tuple(g for t in traces for g in _rank_gpus(t)),
    )


def _rank_gpus(trace: RankTrace) -> tuple[GpuInfo, ...]:
    """Each device the rank ran GPU work on, as its deviceProperties entry where the trace has one."""
    ev = trace.events
    used = np.unique(ev.device[ev.mask(*GPU_KINDS) & (ev.device >= 0)]).tolist()
    if len(used) <= 1:
        gpu = trace.main_gpu()
        if gpu is not None:
            return (gpu,)
        index = trace.main_device
        return (GpuInfo(index=index if index is not None else trace.rank),)
    listed = {g.index: g for g in trace.gpus}
    return tuple(listed.get(d, GpuInfo(index=d)) for d in used)
