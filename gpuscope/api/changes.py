"""``gpuscope.diff``: explain and price the change from one run to another, from the Python API.

(Not ``api/diff.py``: a submodule of that name would shadow the function ``gpuscope.api.diff``.)
"""

from __future__ import annotations

import gzip
import re
import zlib
from os import PathLike
from pathlib import Path

import msgspec

from gpuscope.analyzers import consistency
from gpuscope.api.analysis import analyze_path, load, user_errors
from gpuscope.api.errors import GpuscopeError
from gpuscope.api.report import Report
from gpuscope.changes import DiffOptions, explain
from gpuscope.changes.price import HOURS_PER_MONTH
from gpuscope.gate.config import ConfigError, GateConfig, read_config
from gpuscope.model.codec import report_from_json
from gpuscope.model.diff import Diff
from gpuscope.model.errors import AnalysisError
from gpuscope.model.report import Report as Analysis
from gpuscope.net.deadline import Timeouts
from gpuscope.store import Store, StoreError
from gpuscope.traces import is_url

Run = str | PathLike[str] | Report | Analysis
"""A trace file or folder of rank files (or their URL), a report saved with ``gpuscope analyze --json`` (a gate's
baseline), a saved run's id (or unique prefix, or name), or a report already in hand."""
_REPORT_HEAD = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"gpuscope\.report/')


class NotComparable(GpuscopeError):
    """The two runs cannot be diffed as asked: a rank one of them lacks (without ``allow_partial``), or, with
    ``strict``, another GPU model, GPU count, world size or workload. ``reasons`` holds one sentence each."""

    def __init__(self, reasons: tuple[str, ...], *, strict: bool, no_common_rank: bool = False) -> None:
        hint = ("strict refuses runs of another job" if strict else "no rank is in both runs: there is nothing to "
                "compare" if no_common_rank else "allow_partial compares the ranks both runs have")
        super().__init__("; ".join(reasons) + f" ({hint})")
        self.reasons = reasons
        self.strict = strict
        """Refused by ``strict`` (another job), not for a missing rank."""
        self.no_common_rank = no_common_rank
        """Refused with ``allow_partial`` given: the runs have no rank in common."""


def diff(baseline: Run, candidate: Run, *, usd_per_gpu_hour: float | None = None, job_steps: int | None = None,
         job_hours: float | None = None, hours_per_month: float = HOURS_PER_MONTH,
         config: GateConfig | str | PathLike[str] | None = None, allow_partial: bool = False,
         strict: bool = False, timeout_s: float | None = None, step_range: str | None = None) -> Diff:
    """What changed from ``baseline`` to ``candidate`` and what it costs, as ``gpuscope diff --json`` prints it.

    The step time's change is split into stages (data wait, host/launch, exposed communication, memory copies,
    compute by kernel family, idle) whose changes add up to it; the kernels and operators whose time per step
    changed most; peak memory and GPU busy; the set-up that changed; and the change's price per step, per job
    (``job_steps``, or ``job_hours`` at the baseline's step time) and per month (the baseline's work over
    ``hours_per_month`` hours, 730 for a job running 24x7). ``usd_per_gpu_hour`` prices both runs over their
    own GPU's price. Whether a change is beyond run-to-run noise is the gate's test, with the gate's settings
    (``config``: a ``GateConfig`` or a path to a gate TOML file). Raises ``GpuscopeError`` for a run it cannot
    read. A run may be a trace URL; ``timeout_s`` is one
    deadline for reading both (as ``analyze``'s); ``step_range`` marks the steps of the traces read (as
    ``analyze``'s).

    The runs are checked as the gate checks them (``gpuscope.gate.comparable``). A rank one run lacks (a rank file
    that could not be read, fewer ranks than the world size) raises ``NotComparable`` naming it, unless
    ``allow_partial``: then the ranks both runs have are compared, and priced, on both sides. Another GPU model,
    GPU count, world size or workload is in ``Diff.caveats``; with ``strict`` it raises ``NotComparable``.
    """
    for name, value in (("usd_per_gpu_hour", usd_per_gpu_hour), ("job_steps", job_steps),
                        ("job_hours", job_hours)):
        if value is not None and value < 0:
            raise GpuscopeError(f"{name} must be 0 or more, not {value}")
    if hours_per_month <= 0:
        raise GpuscopeError(f"hours_per_month must be more than 0, not {hours_per_month}")
    options = DiffOptions(usd_per_gpu_hour=usd_per_gpu_hour, job_steps=job_steps, job_hours=job_hours,
                          hours_per_month=hours_per_month, config=_config(config))
    limits = Timeouts.within(timeout_s)  # one deadline for both runs
    before = report_of(baseline, timeouts=limits, timeout_s=timeout_s, step_range=step_range)
    after = report_of(candidate, timeouts=limits, timeout_s=timeout_s, step_range=step_range)
    try:
        found = explain(before, after, options)
    except Exception as exc:  # both runs were read: what the comparison raises is a bug of ours
        raise AnalysisError.wrap(exc, what=f"{_named(baseline)} and {_named(candidate)}", stage="the comparison") \
            from exc
    if found.missing_ranks and not allow_partial:
        raise NotComparable(found.missing_ranks, strict=False)
    if found.missing_ranks and not found.ranks:  # nothing to compare, whatever the flags
        raise NotComparable(found.notes[:1], strict=False, no_common_rank=True)
    if found.caveats and strict:
        raise NotComparable(found.caveats, strict=True)
    return found


def _named(run: Run) -> str:
    """A run as the error line names it: the path or id given, or the run of a report in hand."""
    if isinstance(run, (Report, Analysis)):
        analysis = run.analysis if isinstance(run, Report) else run
        return f"run {analysis.run.id}"
    return str(run)


def report_of(run: Run, *, timeouts: Timeouts | None = None, timeout_s: float | None = None,
              step_range: str | None = None) -> Analysis:
    """The analysis of a run given any way ``diff`` takes one (a trace URL read within ``timeouts``; the steps of
    traces read marked by ``step_range`` where given)."""
    if isinstance(run, Analysis):
        return run
    if isinstance(run, Report):
        return run.analysis
    if is_url(str(run)):
        return analyze_path(str(run), timeouts=timeouts, timeout_s=timeout_s, step_range=step_range)[0]
    path = Path(run)
    if path.exists():
        if path.is_file() and is_saved_report(path):
            return saved_report(path)
        return analyze_path(path, timeouts=timeouts, timeout_s=timeout_s, step_range=step_range)[0]
    return load(_run_id(str(run))).analysis


def is_saved_report(path: Path) -> bool:
    """The file (gzipped or not) starts as a gpuscope report does."""
    try:
        with (gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")) as f:
            head = f.read(256)
    except (OSError, EOFError, zlib.error):  # not a report: the trace reader says what the file is
        return False
    return bool(_REPORT_HEAD.match(head))


def saved_report(path: Path) -> Analysis:
    try:
        with (gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")) as f:
            report = report_from_json(f.read())
    except (OSError, EOFError, zlib.error, RecursionError, msgspec.DecodeError) as exc:
        raise GpuscopeError(f"{path}: not a readable gpuscope report: {exc}") from None
    return consistency.enforce(report)


def _run_id(arg: str) -> str:
    """A saved run's id from its id, a unique prefix of it, or its name (the latest run with that name)."""
    with user_errors(), Store() as store:
        named = next((m.id for m in store.list_runs() if m.name == arg and m.status not in ("running", "failed")),
                     None)
        if named is not None:
            return named
        try:
            return store.resolve(arg)
        except StoreError as exc:
            raise GpuscopeError(f"{arg}: no such file or folder, and {exc}") from None


def _config(config: GateConfig | str | PathLike[str] | None) -> GateConfig:
    if config is None or isinstance(config, GateConfig):
        return config or GateConfig()
    try:
        return read_config(Path(config))
    except ConfigError as exc:
        raise GpuscopeError(str(exc)) from None
