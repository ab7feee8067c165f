"""What the dashboard reads from the store: validated ids, catalog rows, and cached samples.

The dashboard never writes. Samples of a finished run are read once and kept; a run still
recording is topped up with only the rows newer than what is cached (``since_ns``), so a live
page refresh costs one small query.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

import msgspec
import pandas as pd

from gpuscope.figures import GPU_TIMELINE_METRICS, HOST_TIMELINE_METRICS
from gpuscope.model.report import Report
from gpuscope.model.run import RunMeta, StackSamples
from gpuscope.store import Store, StoreError

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
class RunData:
    """One run as the run page shows it."""

    meta: RunMeta
    report: Report | None
    samples: pd.DataFrame | None
    stacks: StackSamples | None
    problem: str | None = None
    """Why the saved report could not be read, when it could not."""


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

    def runs(self) -> list[tuple[RunMeta, Report | None]]:
        """Every run, newest first, with its report where one was saved."""
        return [(meta, self.report(meta.id)) for meta in self.store.list_runs()]

    def report(self, run_id: str) -> Report | None:
        """The saved report; None when there is none or it cannot be read (see ``unreadable``)."""
        try:
            return self.store.load_report(run_id)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None

    def unreadable(self, run_id: str) -> str | None:
        """Why a saved report could not be read, if it could not (one line for the page)."""
        try:
            self.store.load_report(run_id)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return (f"the saved report could not be read ({exc}); `gpuscope show {run_id} --reanalyze`"
                    " analyses the run again")
        return None

    def meta(self, run_id: str | None) -> RunMeta:
        checked = valid_run_id(run_id)
        if checked is None:
            raise UnknownRun("that is not a run id")
        try:
            return self.store.get_meta(checked)
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
        return RunData(meta=meta, report=report, samples=self.samples(meta.id, live=live),
                       stacks=self.stacks(meta.id, live=live), problem=problem)

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
