"""What names a set of trace files and when they were recorded: the content hash that tells one trace analysed
twice from two traces, and the epoch time of a trace's first event, so a trace run carries the date it was
recorded. Both are worked out by the process that reads the rank, from what it has read."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from gpuscope.model.trace import RankTrace
from gpuscope.traces.location import is_url


def content_hash(files: Iterable[tuple[str, str]]) -> str:
    """SHA-256 over the (source, content SHA-256) of each rank file, in file name order: a folder's rank files
    hash alike wherever the folder is (a copy, or the same files by URL), and any changed byte changes it."""
    whole = hashlib.sha256()
    for _, digest in sorted(files, key=lambda f: (PurePosixPath(f[0]).name, f[1])):
        whole.update(bytes.fromhex(digest))
    return whole.hexdigest()


def recorded_span_ns(trace: RankTrace) -> tuple[int, int] | None:
    """The epoch times (ns) of the trace's first event start and last event end: Kineto's
    ``baseTimeNanoseconds`` plus the events' times, the events' times when they are since the epoch already,
    else the span moved to end at the file's modification time. None without events, or when no clock is known
    (events from 0 in a file whose time cannot be read)."""
    if not len(trace.events):
        return None
    offset = _epoch_offset_ns(trace)
    if offset is None:
        return None
    return offset + int(trace.events.ts_ns.min()), offset + int(trace.events.end_ns.max())


def _epoch_offset_ns(trace: RankTrace) -> int | None:
    """What to add to the trace's event times to make them epoch times."""
    known = trace.epoch_offset_ns  # the file's own clock: the one rule every view of trace times goes by
    if known is not None:
        return known
    if is_url(trace.source):
        return None
    try:
        written_ns = Path(trace.source).stat().st_mtime_ns
    except (OSError, ValueError):
        return None
    return written_ns - int(trace.events.end_ns.max())
