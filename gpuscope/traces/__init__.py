"""Profiler traces (Kineto / Chrome-trace JSON, Nsight Systems SQLite exports) into the columnar form of
``gpuscope.model.trace``.

Each name is imported from its module on first use, so a command that needs only ``TraceError`` or ``is_url``
does not load the reader, numpy and the worker pool."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuscope.model.lazy import lazy_names

if TYPE_CHECKING:
    from gpuscope.traces.errors import TraceError
    from gpuscope.traces.identity import content_hash, recorded_span_ns
    from gpuscope.traces.kineto import read_trace
    from gpuscope.traces.loader import Loaded, load, load_files
    from gpuscope.traces.location import SourceFile, is_url
    from gpuscope.traces.sources import find_sources, trace_files

__all__ = ["Loaded", "SourceFile", "TraceError", "content_hash", "find_sources", "is_url", "load", "load_files",
           "read_trace", "recorded_span_ns", "trace_files"]

_MODULES: dict[str, str] = {
    "Loaded": "gpuscope.traces.loader",
    "SourceFile": "gpuscope.traces.location",
    "TraceError": "gpuscope.traces.errors",
    "content_hash": "gpuscope.traces.identity",
    "find_sources": "gpuscope.traces.sources",
    "is_url": "gpuscope.traces.location",
    "load": "gpuscope.traces.loader",
    "load_files": "gpuscope.traces.loader",
    "read_trace": "gpuscope.traces.kineto",
    "recorded_span_ns": "gpuscope.traces.identity",
    "trace_files": "gpuscope.traces.sources",
}
"""Where each name of ``__all__`` lives."""


__getattr__ = lazy_names(__name__, _MODULES)
