"""gpuscope from Python: analyse traces, load saved runs, record live, and get the report as objects.

    >>> import gpuscope
    >>> report = gpuscope.analyze("sample_traces/resnet50_dataloader_bound")
    >>> report.verdict.primary
    'data_loading'

``import gpuscope`` stays light: these names import their modules on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuscope.api.analysis import analyze, load, runs
    from gpuscope.api.changes import diff
    from gpuscope.api.errors import GpuscopeError
    from gpuscope.api.live import record
    from gpuscope.api.report import Report
    from gpuscope.model.diff import Diff
    from gpuscope.model.errors import AnalysisError
    from gpuscope.model.report import RunSummary

__all__ = ["AnalysisError", "Diff", "GpuscopeError", "Report", "RunSummary", "analyze", "diff", "load", "record",
           "runs"]
_HOMES = {"analyze": "gpuscope.api.analysis", "load": "gpuscope.api.analysis", "runs": "gpuscope.api.analysis",
          "diff": "gpuscope.api.changes", "Diff": "gpuscope.model.diff", "GpuscopeError": "gpuscope.api.errors",
          "record": "gpuscope.api.live", "Report": "gpuscope.api.report",
          "RunSummary": "gpuscope.model.report", "AnalysisError": "gpuscope.model.errors"}


def __getattr__(name: str) -> Any:
    """The API's names, each imported from its module on first use (the command line imports only what it runs)."""
    if name not in _HOMES:
        raise AttributeError(f"module 'gpuscope.api' has no attribute {name!r}")
    return getattr(import_module(_HOMES[name]), name)
