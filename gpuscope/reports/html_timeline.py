"""The HTML report's timeline links: the slowest and the median profiler step as Perfetto traces, embedded as
gzipped data URLs to download (so the report stays one file), or, past a size that would weigh the report
down, the command that writes them. Built from ``html_blocks.html`` templates: every value is escaped text."""

from __future__ import annotations

import base64
from collections.abc import Sequence

from markupsafe import Markup

from gpuscope.format import ms
from gpuscope.reports.html_blocks import html, join
from gpuscope.reports.timeline import StepFile

EMBED_MAX_BYTES = 384 * 1024
"""The most gzipped step trace (both files together) a report embeds; a third more once in base64."""
_OPEN_IN = ('Open a downloaded file in <a href="https://ui.perfetto.dev" rel="noreferrer">ui.perfetto.dev</a> '
            "(Open trace file) or chrome://tracing.")


def timeline_section(files: Sequence[StepFile], run_id: str, *, has_trace: bool) -> Markup:
    """The section; empty for a run without a profiler trace."""
    if not has_trace:
        return Markup()
    head = Markup("<h2>Timeline</h2>")
    if not files:
        return head + Markup('<p class="absent">No profiler steps in this trace: the trace file itself opens in '
                             "Perfetto.</p>")
    size = sum(len(f.data) for f in files)
    if size > EMBED_MAX_BYTES:
        return head + html("<p>The slowest and the median step are {} MB of trace, too much to embed here; "
                           "<code>gpuscope timeline {}</code> writes them (each rank's) as files to open in "
                           "Perfetto.</p>", f"{size / 2**20:.1f}", run_id)
    links = join(html("<li>{}</li>", _link(f)) for f in files)
    return head + html('<ul id="timeline-links">{}</ul><p>{} <code>gpuscope timeline {}</code> writes every '
                       "rank's.</p>", links, Markup(_OPEN_IN), run_id)


def _link(f: StepFile) -> Markup:
    step = f.step
    data = "data:application/gzip;base64," + base64.b64encode(f.data).decode("ascii")
    return html('<a download="{}" href="{}">{} step</a> (step {} of rank {}, {}, {} KB)', f.file_name, data,
                " and ".join(step.why).capitalize(), step.name, step.rank, ms(step.duration_us),
                f"{len(f.data) / 1024:.0f}")
