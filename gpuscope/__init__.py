"""gpuscope: how busy your GPUs really were, what held them back, what it cost, and what to change."""

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuscope.api import AnalysisError, Diff, GpuscopeError, Report, RunSummary, analyze, diff, load, record, runs

__all__ = ["AnalysisError", "Diff", "GpuscopeError", "Report", "RunSummary", "__version__", "analyze", "diff", "load",
           "record", "runs"]
_API = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    # The Python API (gpuscope.analyze, ...) imports on first use: `import gpuscope` and the CLI stay light.
    if name in _API:
        from gpuscope import api

        return getattr(api, name)
    raise AttributeError(f"module 'gpuscope' has no attribute {name!r}")
