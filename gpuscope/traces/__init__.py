"""Profiler traces (Kineto / Chrome-trace JSON, Nsight Systems SQLite exports) into the columnar form of
``gpuscope.model.trace``."""

from gpuscope.traces.errors import TraceError
from gpuscope.traces.identity import content_hash, recorded_span_ns
from gpuscope.traces.kineto import read_trace
from gpuscope.traces.loader import Loaded, load, load_files
from gpuscope.traces.location import SourceFile, is_url
from gpuscope.traces.sources import find_sources, trace_files

__all__ = ["Loaded", "SourceFile", "TraceError", "content_hash", "find_sources", "is_url", "load", "load_files",
           "read_trace", "recorded_span_ns", "trace_files"]
