"""Profiler traces (Kineto / Chrome-trace JSON) into the columnar form of ``gpuscope.model.trace``."""

from gpuscope.traces.kineto import TraceError, read_trace
from gpuscope.traces.loader import Loaded, load, load_files, trace_files

__all__ = ["Loaded", "TraceError", "load", "load_files", "read_trace", "trace_files"]
