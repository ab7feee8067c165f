"""gpuscope from Python: analyse traces, load saved runs, record live, and get the report as objects.

    >>> import gpuscope
    >>> report = gpuscope.analyze("sample_traces/resnet50_dataloader_bound")
    >>> report.verdict.primary
    'data_loading'

``import gpuscope`` stays light: these names import their modules on first use.
"""

from gpuscope.api.analysis import analyze, load, runs
from gpuscope.api.errors import GpuscopeError
from gpuscope.api.live import record
from gpuscope.api.report import Report
from gpuscope.model.report import RunSummary

__all__ = ["GpuscopeError", "Report", "RunSummary", "analyze", "load", "record", "runs"]
