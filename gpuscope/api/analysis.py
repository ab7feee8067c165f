"""Traces and saved runs through the Python API: ``analyze``, ``load`` and ``runs``."""

from __future__ import annotations

import socket
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from os import PathLike
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from gpuscope.analyzers import consistency
from gpuscope.analyzers.ranks import RankSummary, rank_facts
from gpuscope.analyzers.report import AnalysisOptions, build_report, run_summary
from gpuscope.api.capabilities import gpu_capabilities
from gpuscope.api.cluster import dask_executor
from gpuscope.api.errors import GpuscopeError
from gpuscope.api.reading import Reading, read_ranks
from gpuscope.api.report import Report
from gpuscope.model.cost import JobSpec
from gpuscope.model.rank import RankReport
from gpuscope.model.redact import bare_url
from gpuscope.model.report import Report as AnalysisReport
from gpuscope.model.report import RunSummary
from gpuscope.model.run import Run, RunMeta
from gpuscope.model.serving import CapturedGraph
from gpuscope.model.trace import RankTrace
from gpuscope.net.deadline import Timeouts
from gpuscope.pricing import CatalogError, PriceError, first_gpu_model, resolve_grid, resolve_price
from gpuscope.pricing.mig import run_price
from gpuscope.specs import SpecError, load_specs, lookup_spec, resolve_target_mfu
from gpuscope.store import Store, StoreError, new_run_id
from gpuscope.traces import Loaded, SourceFile, TraceError, content_hash, is_url, recorded_span_ns
from gpuscope.traces.capture import read_captures


@contextmanager
def user_errors() -> Iterator[None]:
    """The library's own user-facing errors, raised as the API's one type with the same one-line message."""
    try:
        yield
    except (TraceError, StoreError, PriceError, CatalogError, SpecError) as exc:
        raise GpuscopeError(str(exc)) from exc


def options_for(meta: RunMeta, *, usd_per_gpu_hour: float | None, job_hours: float | None,
                job_steps: int | None, samples_per_step: int | None = None,
                target_mfu: float | None = None) -> AnalysisOptions:
    """The price and GPU spec (both for ``meta.gpu_model``, the run's first named GPU, then the overrides), the
    MFU target and the job spec an analysis runs with."""
    for name, value in (("usd_per_gpu_hour", usd_per_gpu_hour), ("job_hours", job_hours), ("job_steps", job_steps),
                        ("samples_per_step", samples_per_step)):
        if value is not None and value < 0:
            raise GpuscopeError(f"{name} must be 0 or more, not {value}")
    with user_errors():
        model = first_gpu_model(meta)
        price = run_price(resolve_price(model, cli_usd_per_gpu_hour=usd_per_gpu_hour), meta.gpus)
        grid = resolve_grid()
        found = lookup_spec(model, load_specs())
        target = resolve_target_mfu(target_mfu)
        capabilities = gpu_capabilities()
    job = JobSpec(job_hours=job_hours, job_steps=job_steps, samples_per_step=samples_per_step or None,
                  grid_kg_co2_per_kwh=grid.kg_co2_per_kwh, grid_source=grid.source)
    ambiguous = (f"{model!r} could be any of {found.choices_text()} in the GPU spec table, whose peaks differ, so "
                 "none is guessed") if found.ambiguous else None
    return AnalysisOptions(price=price, job=job, spec=found.found, spec_note=ambiguous, target_mfu=target.value,
                           target_mfu_source=target.source, capabilities=capabilities)


def analyze_path(path: str | PathLike[str], *, name: str | None = None, usd_per_gpu_hour: float | None = None,
                 job_hours: float | None = None, job_steps: int | None = None, samples_per_step: int | None = None,
                 save: bool = False, store: Store | None = None, jobs: int | None = None, dask: str | Any = None,
                 on_progress: Callable[[SourceFile], None] | None = None,
                 on_loaded: Callable[[Loaded], None] | None = None,
                 new_run: bool = False, target_mfu: float | None = None, timeout_s: float | None = None,
                 timeouts: Timeouts | None = None, capture_traces: Sequence[str | PathLike[str]] = (),
                 on_note: Callable[[str], None] | None = None,
                 step_range: str | None = None) -> tuple[AnalysisReport, RunMeta]:
    """Read traces (a local path or an fsspec URL) into a run: its catalog entry and its report, saved (into
    ``store``, or the default one) when asked. Each rank is read and reduced by the process that reads it: local
    worker processes, or the Dask cluster ``dask`` names. ``on_loaded`` sees what was read before the report is
    built (and may stop there by raising). Traces saved before (the same file contents) are saved over their
    run, unless ``new_run``. ``timeout_s`` bounds the reading (``remote_timeouts``; ``timeouts``, the limits of a
    command that reads more than one target, where it applies). ``capture_traces``: traces of the serving engine's
    CUDA/HIP graph capture, whose operators the graph replays' GPU time is given to. ``on_note`` hears what was
    cleared from the store before (what analyses killed part way left; a ``UserWarning`` without it).
    ``step_range``: the name of the range that marks a step (``--step-range``; ``RankTrace.step_range``), which no
    rank having is an error. What ``analyze`` and ``gpuscope analyze`` both run; raises ``GpuscopeError``."""
    check_step_range(step_range)
    target: str | Path = str(path) if is_url(str(path)) else Path(path)
    timeouts = remote_timeouts(target, dask=dask, timeout_s=timeout_s, shared=timeouts)
    if dask is not None and isinstance(target, Path):
        target = target.absolute()  # a Dask worker runs in a folder of its own: it reads the path from the root
    captures = _captures(capture_traces, timeouts)
    with ExitStack() as stack:
        if save and store is None:
            store = stack.enter_context(_open_store())
        keep = store if save else None
        reading = stack.enter_context(_read(target, store=keep, jobs=jobs, dask=dask, on_progress=on_progress,
                                            timeouts=timeouts, step_range=step_range))
        for note in reading.notes:
            on_note(note) if on_note is not None else warnings.warn(note, stacklevel=3)
        if on_loaded is not None:
            on_loaded(reading.loaded)
        return _analyze_read(reading, target, name=name, usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours,
                             job_steps=job_steps, samples_per_step=samples_per_step, store=keep, new_run=new_run,
                             target_mfu=target_mfu, captures=captures, step_range=step_range)


def check_step_range(step_range: str | None) -> None:
    """A step range's name must name something: an empty one would take every range for a step."""
    if step_range is not None and not step_range.strip():
        raise GpuscopeError("--step-range needs the name of the range that marks a step (for example 'execute_')")


def step_range_found(ranks: Sequence[RankReport], step_range: str | None, label: str) -> None:
    """GpuscopeError when ``step_range`` was given and marks the steps of no rank: a mistyped name is said, not
    answered with other steps."""
    if step_range is not None and not any(r.step_source == f"range {step_range}" for r in ranks):
        raise GpuscopeError(f"{label}: no range named {step_range!r} (or beginning with it) marks a step in any rank "
                            "(--step-range takes a record_function or operator name from the trace)")


def _captures(paths: Sequence[str | PathLike[str]], timeouts: Timeouts | None) -> tuple[CapturedGraph, ...]:
    """The graphs captured in each capture trace (read within the command's ``timeouts``); GpuscopeError (one
    line) for one that cannot be read."""
    with user_errors():
        return tuple(g for path in paths for g in read_captures(str(path), timeouts=timeouts))


def remote_timeouts(target: str | Path, *, dask: str | Any = None, timeout_s: float | None = None,
                    shared: Timeouts | None = None) -> Timeouts | None:
    """The limits of an analysis's reading: one deadline, ``timeout_s`` from now (``COMMAND_S`` by default; or the
    ``shared`` limits of the whole command) when it reads a URL or runs on Dask, with each remote step's own limits
    (``gpuscope.net.deadline``); for local files on this machine, the deadline only when ``timeout_s`` is given."""
    if timeout_s is not None and timeout_s <= 0:
        raise GpuscopeError(f"timeout must be more than 0 seconds, not {timeout_s:g}")
    if timeout_s is None and dask is None and not is_url(str(target)):
        return None
    return shared or Timeouts.within(timeout_s)


@contextmanager
def _read(target: str | Path, *, store: Store | None, jobs: int | None, dask: str | Any,
          on_progress: Callable[[SourceFile], None] | None, timeouts: Timeouts | None,
          step_range: str | None = None) -> Iterator[Reading]:
    """``read_ranks`` in this machine's processes or on Dask (the client is closed once every rank is in)."""
    with ExitStack() as stack, user_errors():
        if dask is None:
            reading = stack.enter_context(read_ranks(target, store=store, jobs=jobs, on_progress=on_progress,
                                                     timeouts=timeouts, step_range=step_range))
        else:
            with dask_executor(dask, timeouts) as executor:
                reading = stack.enter_context(read_ranks(target, store=store, executor=executor,
                                                         on_progress=on_progress, timeouts=timeouts,
                                                         step_range=step_range))
        yield reading


def _analyze_read(reading: Reading, target: str | Path, *, name: str | None, usd_per_gpu_hour: float | None,
                  job_hours: float | None, job_steps: int | None, samples_per_step: int | None,
                  store: Store | None, new_run: bool, target_mfu: float | None = None,
                  captures: tuple[CapturedGraph, ...] = (),
                  step_range: str | None = None) -> tuple[AnalysisReport, RunMeta]:
    loaded = reading.loaded
    if not reading.summaries:
        raise GpuscopeError(f"{_label(target)}: none of the {len(loaded.files)} trace files could be read")
    meta = trace_run_meta(reading.summaries, name=name or _default_name(target))
    options = options_for(meta, usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps,
                          samples_per_step=samples_per_step, target_mfu=target_mfu)
    if options.price is not None:
        meta = replace(meta, price_source=options.price.source)
    options = replace(options, captures=captures)
    analysis = build_report(Run(meta=meta), options, warnings=(*(f"skipped {e}" for e in loaded.errors),
                                                                *loaded.warnings), ranks=reading.summaries)
    # Kept apart from the warnings so a gate can tell a job with a rank missing from a whole one.
    analysis = replace(analysis, unread_rank_files=tuple(str(e) for e in loaded.errors if not e.not_a_trace))
    step_range_found(analysis.ranks, step_range, _label(target))
    if job_steps is not None and not any(r.steps for r in analysis.ranks):
        raise GpuscopeError(f"{_label(target)}: --job-steps needs steps (ProfilerStep#N, a serving engine's step "
                            "ranges or --step-range) and this trace has none; project the cost with --job-hours "
                            "instead")
    if store is not None:
        if reading.unsaved:
            raise GpuscopeError(f"the traces of run {meta.id} could not be written to {store.home} "
                                f"({reading.unsaved[0]}): the run was not saved; free some space and try again")
        digest = _content_hash(reading.summaries)
        with user_errors():
            saved_id = None if new_run or digest is None else store.run_with_content(digest)
            if saved_id is not None:  # the same traces again: their run, brought up to date
                meta = replace(meta, id=saved_id)
                analysis = replace(analysis, run=replace(analysis.run, id=saved_id))
            meta = store.save_staged_run(meta, reading.staged, analysis, content_hash=digest,
                                         over=saved_id is not None)
    return analysis, meta


def _content_hash(summaries: Sequence[RankSummary]) -> str | None:
    """What names the trace files a run was read from (``gpuscope.traces.content_hash``); None when a rank's
    reader could not say."""
    files = [(s.facts.source, s.facts.content_sha256) for s in summaries]
    return content_hash(files) if files and all(digest for _, digest in files) else None


def _label(target: str | Path) -> str:
    return bare_url(target) if isinstance(target, str) else str(target)


def _default_name(target: str | Path) -> str:
    """A run's name when none is given: the folder's or file's own name (a URL's last part)."""
    if isinstance(target, str):
        return PurePosixPath(urlsplit(target).path).name or urlsplit(target).netloc
    return target.resolve().name


@contextmanager
def _open_store() -> Iterator[Store]:
    with user_errors():
        store = Store()
    with store:
        yield store


def analyze(path: str | PathLike[str], *, usd_per_gpu_hour: float | None = None, job_hours: float | None = None,
            job_steps: int | None = None, save: bool = False, name: str | None = None,
            jobs: int | None = None, dask: str | Any = None, new_run: bool = False,
            target_mfu: float | None = None, timeout_s: float | None = None, step_range: str | None = None) -> Report:
    """Analyse PyTorch profiler (Kineto) traces: one trace file (``.json``, ``.json.gz``) or a directory of
    rank files, as ``gpuscope analyze PATH`` does, with the same numbers. ``path`` may be an fsspec URL
    (``s3://bucket/job/``, ``gs://``, ``az://``, ``https://``) of a file or a folder; each rank is read from there
    by the process that analyses it.

    ``usd_per_gpu_hour`` overrides the catalog's price; ``job_hours`` or ``job_steps`` project the cost to
    the whole job; ``target_mfu`` (0..1; default config.toml's, else 40%) is the MFU the run's is priced against.
    With ``save`` the run goes into the store (``GPUSCOPE_HOME``) for ``load``, ``gpuscope
    show`` and the dashboard; a trace saved before is saved over its run unless ``new_run``. ``jobs`` caps the
    local worker processes; ``dask`` runs the per-rank work on a
    Dask cluster instead (a scheduler address such as ``tcp://host:8786``, or a connected
    ``distributed.Client``), with the same results. Rank files that cannot be read are skipped and named in
    ``Report.warnings``. ``timeout_s`` is one deadline for the reading (default: 300 s when ``path`` is a URL or
    ``dask`` is given, none for local files): a server or scheduler that does not answer by then raises
    ``GpuscopeError``, and each connection and read has its own limit under it (``gpuscope.net.deadline``).
    ``step_range`` names the range that marks a step (a ``record_function`` or operator name, or the start of one),
    where the trace's steps are not ProfilerStep or a serving engine's own ranges. Raises ``GpuscopeError`` when
    nothing can be read or a setting is bad.
    """
    analysis, _ = analyze_path(path, usd_per_gpu_hour=usd_per_gpu_hour, job_hours=job_hours, job_steps=job_steps,
                               save=save, name=name, jobs=jobs, dask=dask, new_run=new_run, target_mfu=target_mfu,
                               timeout_s=timeout_s, step_range=step_range)
    return Report(analysis)


def load(run_id: str, *, reanalyze: bool = False) -> Report:
    """A saved run's report (a run id or a unique prefix of one, as ``gpuscope runs`` lists them), with its
    live samples. A run not analysed yet, or with ``reanalyze``, is analysed (and saved) with this version,
    as ``gpuscope show`` does. Raises ``GpuscopeError`` for an unknown id or a fleet run."""
    with user_errors(), Store() as store:
        full_id = store.resolve(run_id)
        meta = store.get_meta(full_id)
        if meta.kind in ("fleet", "memory"):
            raise GpuscopeError(f"run {full_id} is a {meta.kind} run: see it with `gpuscope show {full_id}`")
        analysis = None if reanalyze else store.load_report(full_id)
        samples = store.samples(full_id)
        if analysis is None:
            run = store.load_run(full_id)
            if not run.traces and run.samples is None and run.stacks is None:
                raise GpuscopeError(f"run {full_id} has no recorded data to analyse")
            analysis = build_report(run, options_for(meta, usd_per_gpu_hour=None, job_hours=None, job_steps=None))
            store.save_report(full_id, analysis)
    # A saved report (perhaps from an older version) is checked as a fresh one is before it is shown.
    return Report(consistency.enforce(analysis), samples=samples if len(samples) else None)


def runs() -> list[RunSummary]:
    """The saved runs, newest first: id, kind, name, status, start, duration and GPUs of each. Runs that cannot be
    read (a damaged store or catalog row) are left out, each kind of damage with one ``UserWarning`` line."""
    with user_errors(), Store() as store:
        listing = store.listing()
    for line in listing.problems:
        warnings.warn(line, stacklevel=2)
    return [run_summary(Run(meta=m)) for m in listing.runs]


def trace_run_meta(ranks: Sequence[RankSummary | RankTrace], *, name: str) -> RunMeta:
    """A trace run's catalog entry: when it was recorded (``recorded_span_ns``; the analysis's own time only when
    the trace cannot say) and the GPUs its ranks ran work on (one per rank in most jobs), from each rank's summary
    (or its trace)."""
    facts = [r.facts if isinstance(r, RankSummary) else rank_facts(r, recorded_ns=recorded_span_ns(r))
             for r in ranks]
    spans = [(f.started_ns, f.ended_ns) for f in facts if f.started_ns is not None and f.ended_ns is not None]
    started = min(s for s, _ in spans) if spans else time.time_ns()
    # From the first rank's start to the last rank's end, but never longer than the ranks' recorded time added
    # up: ranks recorded apart (traces gathered from different jobs) are not dated across the gap between them.
    recorded = sum(e - s for s, e in spans)
    ended = min(max(e for _, e in spans), started + recorded) if spans else started
    return RunMeta(
        id=new_run_id(started), name=name, kind="trace", status="complete", started_ns=started,
        ended_ns=ended, host=socket.gethostname(),
        command=tuple(f.source for f in facts), gpus=tuple(g for f in facts for g in f.gpus),
    )
