"""The plotly.js an HTML report inlines, gzipped: the page unpacks it with the browser's DecompressionStream.

The full plotly.js is 4.8 MB, most of it trace types no report draws (maps, 3-D, WebGL). gpuscope ships a build of
the same plotly.js version with only the report's trace types (``PARTIAL_TRACES``; made by ``scripts/plotly_bundle``
with plotly.js' own build settings), 0.4 MB gzipped. Where a figure draws another type, or the installed plotly
package ships another plotly.js than the one built, the full bundle is inlined instead, gzipped too: the page
is then larger but still draws, offline, the plotly.js its figures were written for.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from functools import cache
from importlib import resources

import plotly.offline

PARTIAL_TRACES = ("bar", "scatter", "icicle")
"""The trace types of gpuscope's report charts (``gpuscope.figures``): what the shipped build registers."""
_PARTIAL = "data/plotly-report.min.js.gz"
_PARTIAL_VERSION = "data/plotly-report.version"


def plotly_js_gz(trace_types: Iterable[str]) -> bytes:
    """plotly.js, gzipped, able to draw ``trace_types``: the shipped partial build where it can, else the full one."""
    if set(trace_types) <= set(PARTIAL_TRACES) and partial_version() == plotly.offline.get_plotlyjs_version():
        return _partial()
    return _full()


def partial_version() -> str | None:
    """The plotly.js version of the shipped partial build; None where the package was installed without it."""
    try:
        return resources.files("gpuscope").joinpath(_PARTIAL_VERSION).read_text(encoding="utf-8").strip()
    except OSError:
        return None


@cache
def _partial() -> bytes:
    return resources.files("gpuscope").joinpath(_PARTIAL).read_bytes()


@cache
def _full() -> bytes:
    # mtime=0: the same report written twice is the same bytes.
    return gzip.compress(str(plotly.offline.get_plotlyjs()).encode("utf-8"), compresslevel=9, mtime=0)
