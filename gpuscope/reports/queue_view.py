"""A rank's launch queue and step source in words, for the terminal and the other views: shown where the GPU-side
wait matters, or where one call fills the steady window."""

from __future__ import annotations

from gpuscope.format import ms, num, pct
from gpuscope.model.rank import RankReport

QUEUE_SHOWN = 0.05
"""The launch queue is shown for a rank whose GPU-side wait is this share of its window or more."""


def queue_lines(r: RankReport) -> list[str]:
    """Where the GPU-side wait matters (or one call fills the steady window): the launch-to-start latency, the
    deepest stream queue, and the call."""
    lines = []
    side = r.idle_breakdown_us.gpu_side_wait if r.idle_breakdown_us is not None else None
    q = r.queue
    if q is not None and side and r.window_us and side >= QUEUE_SHOWN * r.window_us:
        if q.latency is not None:
            lat = q.latency
            graphs = f", {lat.graph_kernels} by graph replays" if lat.graph_kernels else ""
            lines.append(f"launch-to-start latency p50 {ms(lat.p50_us)}, p99 {ms(lat.p99_us)}, max {ms(lat.max_us)} "
                         f"({lat.kernels} kernels{graphs})")
        if q.streams:
            deep = max(q.streams, key=lambda x: x.max_depth)
            lines.append(f"deepest queue: {deep.max_depth} launched, not started, on GPU {deep.device} stream "
                         f"{deep.stream} (time-weighted mean {num(deep.time_mean_depth)})")
    if r.filling_call is not None:
        c = r.filling_call
        lines.append(f"one call fills the steady window: {c.name} {ms(c.duration_us)} ({pct(c.share)} of it)")
    return lines


def step_source_words(source: str | None) -> str:
    """What marked a rank's steps, in words: the engine's step ranges, or the ranges the user named."""
    if source == "engine":
        return "the serving engine's step ranges"
    if source is not None and source.startswith("range "):
        return f"the ranges named {source.removeprefix('range ')!r}"
    return "ProfilerStep"
