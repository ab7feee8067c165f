"""The HTML report's timeline links: the slowest and the median profiler step as Perfetto traces, embedded as
gzipped data URLs to download (so the report stays one file), or, past a size that would weigh the report
down, the command that writes them."""

from __future__ import annotations

import base64
from collections.abc import Sequence

from gpuscope.reports.format import ms
from gpuscope.reports.html_assets import esc
from gpuscope.reports.timeline import StepFile

EMBED_MAX_BYTES = 384 * 1024
"""The most gzipped step trace (both files together) a report embeds; a third more once in base64."""
OPEN_IN = ('Open a downloaded file in <a href="https://ui.perfetto.dev" rel="noreferrer">ui.perfetto.dev</a> '
           "(Open trace file) or chrome://tracing.")


def timeline_section(files: Sequence[StepFile], run_id: str, *, has_trace: bool) -> str:
    """The section; empty for a run without a profiler trace."""
    if not has_trace:
        return ""
    command = f"<code>gpuscope timeline {esc(run_id)}</code>"
    head = "<h2>Timeline</h2>"
    if not files:
        return head + '<p class="absent">No profiler steps in this trace: the trace file itself opens in Perfetto.</p>'
    size = sum(len(f.data) for f in files)
    if size > EMBED_MAX_BYTES:
        return (head + f"<p>The slowest and the median step are {size / 2**20:.1f} MB of trace, too much to embed "
                f"here; {command} writes them (each rank's) as files to open in Perfetto.</p>")
    links = "".join(f"<li>{_link(f)}</li>" for f in files)
    return (head + f'<ul id="timeline-links">{links}</ul><p>{OPEN_IN} {command} writes every rank\'s.</p>')


def _link(f: StepFile) -> str:
    step = f.step
    what = " and ".join(step.why)
    data = base64.b64encode(f.data).decode("ascii")
    return (f'<a download="{esc(f.file_name)}" href="data:application/gzip;base64,{data}">'
            f"{esc(what.capitalize())} step</a> (step {esc(step.name)} of rank {step.rank}, "
            f"{ms(step.duration_us)}, {len(f.data) / 1024:.0f} KB)")
