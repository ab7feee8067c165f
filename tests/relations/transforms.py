"""Transformations of real traces for the relations that must hold: each takes a trace's raw JSON (as Kineto wrote
it, read with the standard library, not gpuscope's readers) and returns it changed in one known way, so a test can
say how the answer must move. Shared by every relation test of this folder.

- ``stall``: the host stalls ``k_us`` at the end of the named profiler steps: each of those steps gets exactly
  ``k_us`` longer and everything after it starts ``k_us`` later;
- ``scale``: every event's time (start, relative to the trace's first, and duration) times a factor;
- ``keep_steps``: every ProfilerStep marker dropped but the named ones;
- ``shuffle``: the trace's events in another order; ``copy_ranks``: the rank files under other names, in another
  order.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpuscope.analyzers.report import AnalysisOptions, build_report
from gpuscope.api.analysis import trace_run_meta
from gpuscope.api.capabilities import gpu_capabilities
from gpuscope.model.report import Report
from gpuscope.model.run import Run
from gpuscope.pricing.resolve import first_gpu_model, resolve_price
from gpuscope.traces import load

Doc = dict[str, Any]
STEP_PREFIX = "ProfilerStep#"


def read(path: Path) -> Doc:
    """A trace file's JSON, gzipped or not."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc: Doc = json.load(f)
    return doc


def write(doc: Doc, path: Path) -> Path:
    """``doc`` as a plain JSON trace file at ``path`` (plain: compressing it would cost more than reading it)."""
    path.write_text(json.dumps(doc))
    return path


def rank_files(folder_or_file: Path) -> list[Path]:
    """The trace files of a sample: the file itself, or the trace files of a folder of ranks."""
    if folder_or_file.is_file():
        return [folder_or_file]
    return sorted(p for p in folder_or_file.iterdir() if p.name.endswith((".json", ".json.gz")))


def steps(doc: Doc) -> dict[str, tuple[float, float]]:
    """Each ProfilerStep#N marker: N -> (ts, dur) in µs."""
    return {str(e["name"]).removeprefix(STEP_PREFIX): (float(e["ts"]), float(e["dur"]))
            for e in doc["traceEvents"] if str(e.get("name", "")).startswith(STEP_PREFIX) and "dur" in e}


def stall(doc: Doc, names: Iterable[str], k_us: float) -> Doc:
    """The host stalls ``k_us`` 1 µs before the end of each named step's ProfilerStep marker: every event running
    then (the marker, the ops around it, a kernel in flight) lasts ``k_us`` longer, every event starting then or
    later starts ``k_us`` later. A step ends at its marker's end or at the end of the GPU work it launched,
    whichever is later, and either moves by exactly ``k_us``: the step gets ``k_us`` longer, the others keep their
    lengths."""
    marks = steps(doc)
    at = sorted((marks[n][0] + marks[n][1] - 1.0 for n in names), reverse=True)  # the latest first: earlier
    events = [dict(e) for e in doc["traceEvents"]]  # stall points stay where they were
    for t in at:
        for e in events:
            ts = e.get("ts")
            if not isinstance(ts, int | float):
                continue
            if ts >= t:
                e["ts"] = ts + k_us
            elif isinstance(e.get("dur"), int | float) and ts + e["dur"] > t:
                e["dur"] = e["dur"] + k_us
    return {**doc, "traceEvents": events}


def scale(doc: Doc, factor: float) -> Doc:
    """Every event's start (from the trace's first) and duration times ``factor``: the same run, that much faster
    (0.5) or slower."""
    times = [e["ts"] for e in doc["traceEvents"] if isinstance(e.get("ts"), int | float) and e.get("ph") != "M"]
    origin = min(times) if times else 0.0
    events = []
    for e in doc["traceEvents"]:
        e = dict(e)
        if isinstance(e.get("ts"), int | float) and e.get("ph") != "M":
            e["ts"] = origin + (e["ts"] - origin) * factor
        if isinstance(e.get("dur"), int | float):
            e["dur"] = e["dur"] * factor
        events.append(e)
    return {**doc, "traceEvents": events}


def keep_steps(doc: Doc, names: Iterable[str]) -> Doc:
    """Every ProfilerStep marker dropped but those of ``names``: a profile of those steps alone."""
    kept = {f"{STEP_PREFIX}{n}" for n in names}
    return {**doc, "traceEvents": [e for e in doc["traceEvents"]
                                   if not str(e.get("name", "")).startswith(STEP_PREFIX) or e.get("name") in kept]}


def shuffle(doc: Doc, seed: int) -> Doc:
    """The same events in another order (Kineto writes them by thread and kind, not in time order)."""
    events = list(doc["traceEvents"])
    random.Random(seed).shuffle(events)
    return {**doc, "traceEvents": events}


def copy_ranks(sample: Path, to: Path, *, seed: int) -> Path:
    """The sample's rank files copied to ``to`` under new names that sort in another order than the originals."""
    to.mkdir(parents=True)
    files = rank_files(sample)
    order = list(range(len(files)))
    random.Random(seed).shuffle(order)
    for new, old in zip(order, files):
        suffix = ".json.gz" if old.name.endswith(".gz") else ".json"
        shutil.copyfile(old, to / f"{chr(ord('z') - new)}_trace{suffix}")
    return to


def transformed(sample: Path, to: Path, change: Any) -> Path:
    """Each rank file of ``sample`` changed by ``change`` (a function of a trace's JSON), written under ``to`` with
    its own name (a folder for a folder of ranks, a file for a file)."""
    files = rank_files(sample)
    if sample.is_file():
        return write(change(read(files[0])), to.with_suffix(".json"))
    to.mkdir(parents=True)
    for f in files:
        write(change(read(f)), to / f.name.removesuffix(".gz"))
    return to


def analysed(path: Path) -> Report:
    """The report of a (transformed) trace, built as ``tests.analyzers.bundled.bundled_report`` builds a sample's:
    priced from the shipped catalog and GPU table alone, so the two compare figure for figure."""
    loaded = load(path)
    meta = trace_run_meta(loaded.traces, name=path.name)
    home = Path(tempfile.mkdtemp())
    price = resolve_price(first_gpu_model(meta), home=home, env={})
    options = AnalysisOptions(price=price, capabilities=gpu_capabilities(home))
    return build_report(Run(meta=meta, traces=loaded.traces), options, warnings=loaded.warnings)
