"""What the dashboard reads from the store: validated ids, catalog rows, and cached samples.

The dashboard never writes. Samples of a finished run are read once and kept; a run still
recording is topped up with only the rows newer than what is cached (``since_ns``), so a live
page refresh costs one small query. The runs list decodes a saved report once: its summary is kept
for as long as the report is the one saved when it was read (the run, and when its report was written).
A damaged store or record is a line on the page, never an error page.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

import pandas as pd

from gpuscope.analyzers import consistency
from gpuscope.figures import GPU_TIMELINE_METRICS, HOST_TIMELINE_METRICS
from gpuscope.figures.summary import verdict_text
from gpuscope.model.report import Report
from gpuscope.model.run import RunMeta, StackSamples
from gpuscope.store import Store, StoreDamaged, StoreError

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""What a run id from a URL may look like; anything else is refused before the store sees it."""
TIMELINE_METRICS = tuple(dict.fromkeys(GPU_TIMELINE_METRICS + HOST_TIMELINE_METRICS))
CACHED_RUNS = 4


class UnknownRun(Exception):
    """The URL names no run of this store (or is not a run id at all)."""


def valid_run_id(text: str | None) -> str | None:
    """``text`` if it has the shape of a run id, else None."""
    return text if text is not None and RUN_ID.fullmatch(text) else None


@dataclass(frozen=True)
class ReportSummary:
    """What the runs list shows of a saved report."""

    verdict: str
    total_usd: float | None
    wasted_usd: float | None


def summarize(report: Report) -> ReportSummary:
    cost = report.cost
    return ReportSummary(verdict=verdict_text(report), total_usd=cost.total_usd if cost is not None else None,
                         wasted_usd=cost.wasted_usd if cost is not None else None)


@dataclass(frozen=True)
class RunsView:
    """Every run that can be read, newest first, with its report's summary (None: none saved, or unreadable),
    and one line for each thing that could not be read."""

    runs: tuple[tuple[RunMeta, ReportSummary | None], ...]
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunData:
    """One run as the run page shows it."""

    meta: RunMeta
    report: Report | None
    samples: pd.DataFrame | None
    stacks: StackSamples | None
    problem: str | None = None
    """Why the saved report could not be read, when it could not."""
    samples_problem: str | None = None
    """Why the samples or stack samples could not be read, when they could not."""


def _compact(samples: pd.DataFrame) -> pd.DataFrame:
    """The metric as a categorical with fixed categories (the store was asked for exactly these): a
    fraction of the memory, fast to filter, and chunks of a live run concatenate keeping the dtype."""
    return samples.assign(metric=pd.Categorical(samples["metric"], categories=TIMELINE_METRICS))


class RunReader:
    """Read-only access to the store for the dashboard's callbacks (safe from Flask's threads)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._samples: OrderedDict[str, pd.DataFrame] = OrderedDict()
        self._stacks: OrderedDict[str, StackSamples | None] = OrderedDict()
        self._summaries: dict[str, tuple[int, ReportSummary | None, str | None]] = {}
        """run id -> (when its report was written, its summary, why it could not be read)"""

    def runs(self) -> RunsView:
        """Every run, newest first, with its report's summary: decoded once per saved report, not per refresh."""
        listing = self.store.listing()
        problems = list(listing.problems)
        try:
            versions: dict[str, int] | None = self.store.report_versions()
        except StoreError as exc:
            versions = None
            problems.append(self._line(exc))
        rows = []
        for meta in listing.runs:
            summary, problem = self._summary(meta.id, versions)
            rows.append((meta, summary))
            if problem is not None:
                problems.append(problem)
        with self._lock:
            for gone in set(self._summaries) - {m.id for m in listing.runs}:
                del self._summaries[gone]
        return RunsView(runs=tuple(rows), problems=tuple(dict.fromkeys(problems)))

    def _summary(self, run_id: str, versions: dict[str, int] | None) -> tuple[ReportSummary | None, str | None]:
        version = versions.get(run_id) if versions is not None else None
        if versions is not None and version is None:
            return None, None  # no report saved
        with self._lock:
            cached = self._summaries.get(run_id)
        if cached is not None and version is not None and cached[0] == version:
            return cached[1], cached[2]
        try:
            report = self.store.load_report(run_id)
            summary, problem = (summarize(consistency.enforce(report)) if report is not None else None), None
        except StoreError as exc:
            summary, problem = None, self._line(exc)
        if version is not None:
            with self._lock:
                self._summaries[run_id] = (version, summary, problem)
        return summary, problem

    def _line(self, exc: StoreError) -> str:
        """A damaged file is one line for the whole page, whichever read ran into it."""
        return self.store.damage if isinstance(exc, StoreDamaged) and self.store.damage else str(exc)

    def report(self, run_id: str) -> Report | None:
        """The saved report, checked as a fresh one is (``consistency.enforce``); None when there is none or it
        cannot be read (see ``unreadable``)."""
        try:
            report = self.store.load_report(run_id)
        except StoreError:
            return None
        return None if report is None else consistency.enforce(report)

    def unreadable(self, run_id: str) -> str | None:
        """Why a saved report could not be read, if it could not (one line for the page)."""
        try:
            self.store.load_report(run_id)
        except StoreError as exc:
            return self._line(exc)
        return None

    def meta(self, run_id: str | None) -> RunMeta:
        checked = valid_run_id(run_id)
        if checked is None:
            raise UnknownRun("that is not a run id")
        try:
            return self.store.get_meta(checked)
        except StoreDamaged as exc:
            raise UnknownRun(self._line(exc)) from None
        except StoreError:
            raise UnknownRun(f"no run with id {checked} in this store") from None

    def load(self, run_id: str | None, *, samples: bool = True) -> RunData:
        """The run's catalog entry and report, and (unless ``samples`` is False) its samples and stacks."""
        meta = self.meta(run_id)
        report = self.report(meta.id)
        problem = self.unreadable(meta.id) if report is None else None
        if not samples:
            return RunData(meta=meta, report=report, samples=None, stacks=None, problem=problem)
        live = meta.status == "running"
        try:
            return RunData(meta=meta, report=report, samples=self.samples(meta.id, live=live),
                           stacks=self.stacks(meta.id, live=live), problem=problem)
        except StoreError as exc:
            return RunData(meta=meta, report=report, samples=None, stacks=None, problem=problem,
                           samples_problem=self._line(exc))

    def samples(self, run_id: str, *, live: bool) -> pd.DataFrame | None:
        """The run's timeline samples; a live run is topped up with rows newer than the cached ones."""
        with self._lock:
            cached = self._samples.get(run_id)
        if cached is None:
            frame = _compact(self.store.samples(run_id, metrics=TIMELINE_METRICS))
        elif live:
            since = int(cached["ts_ns"].iloc[-1]) if len(cached) else None
            fresh = _compact(self.store.samples(run_id, metrics=TIMELINE_METRICS, since_ns=since))
            frame = pd.concat([cached, fresh], ignore_index=True) if len(fresh) else cached
        else:
            frame = cached
        with self._lock:
            self._samples[run_id] = frame
            self._samples.move_to_end(run_id)
            while len(self._samples) > CACHED_RUNS:
                self._samples.popitem(last=False)
        return frame if len(frame) else None

    def stacks(self, run_id: str, *, live: bool) -> StackSamples | None:
        with self._lock:
            if not live and run_id in self._stacks:
                return self._stacks[run_id]
        stacks = self.store.stacks(run_id)
        with self._lock:
            self._stacks[run_id] = stacks
            while len(self._stacks) > CACHED_RUNS:
                self._stacks.popitem(last=False)
        return stacks
