"""Read a hung job's flight-recorder dumps and say what it is stuck in (``gpuscope hang PATH``).

    >>> from gpuscope.api.hang import hang
    >>> report = hang("sample_traces/gloo_4rank/hang/json")
    >>> report.missing_ranks
    (1,)
"""

from __future__ import annotations

from pathlib import Path

from gpuscope.analyzers.across.hang import find_hang
from gpuscope.model.hang import HangReport
from gpuscope.traces.flight_recorder import read_dumps


def hang(path: Path | str) -> HangReport:
    """The hang the dumps under ``path`` (a folder of per-rank dumps, JSON or pickle) show; a TraceError, one line,
    for a file that is not a readable dump (a pickle that would run code is refused without running it)."""
    return find_hang(read_dumps(path))
