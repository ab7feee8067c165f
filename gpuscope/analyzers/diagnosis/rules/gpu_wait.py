"""GPU-side wait: the GPU idle while work the host had launched sat queued, or with nothing on the host to blame.

Its time is part of the ``idle`` stage, never host overhead (``analyzers.trace.queue`` says how it is found). The
finding names it with the launch-to-start latency and queue depth behind it, and the one call that fills the
window where one does; the recommendation is to find what the GPU waited for: no change to the host's code gives
that time back.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuscope.analyzers.diagnosis import codes
from gpuscope.analyzers.diagnosis.context import Context, RuleOutput, finding, severity
from gpuscope.analyzers.diagnosis.summary import GPU_SIDE, filling_call_sentence
from gpuscope.model.diagnosis import Recommendation

SIDE_MIN = 0.05
"""A GPU-side wait of 5% of the step or more is reported."""


def apply(ctx: Context) -> RuleOutput:
    side = ctx.shares.details.get("gpu_side_wait_share", 0.0)
    if side < SIDE_MIN or ctx.no_gpu:
        return RuleOutput()
    rec = Recommendation(
        codes.FIND_GPU_WAIT, "Find what the GPU waited for",
        f"Work the host had already launched did not start for {side:.1%} of the step, or GPU work came with no "
        "host activity recorded to launch it: the GPU was busy with something the trace does not show, or a "
        f"stream waited. Check for other processes on the GPU ({ctx.words.smi} lists them); profile with every "
        "thread's and stream's activities recorded, starting before the work it measures; look for streams "
        f"waiting on events ({ctx.words.runtime.lower()}StreamWaitEvent) and blocking copies, which wait for "
        "everything queued before them.",
        None, f"Unknown until the cause is found: at most the GPU-side wait's {side:.1%} of the step.", stage="idle")
    filling = filling_call_sentence(ctx)
    evidence: dict[str, float | int | str | None] = {
        "gpu_side_wait_share": side,
        "gpu_side_wait_us": _sum(r.idle_breakdown_us.gpu_side_wait if r.idle_breakdown_us else None
                                 for r in ctx.ranks),
        "launch_latency_p50_us": ctx.mean(lambda r: r.queue.latency.p50_us if r.queue and r.queue.latency else None),
        "launch_latency_p99_us": ctx.mean(lambda r: r.queue.latency.p99_us if r.queue and r.queue.latency else None),
        "queue_depth_max": max((q.max_depth for r in ctx.ranks if r.queue for q in r.queue.streams), default=None),
        "filling_call": filling,
    }
    title = (f"The GPU waits on its own side for {side:.1%} of the step, not on the host ({GPU_SIDE})"
             + (f". {filling}" if filling else ""))
    f = finding(codes.GPU_SIDE_WAIT, severity(side, warning=0.15, critical=0.30), title, evidence, share=side,
                recs=[rec], stage="idle")
    return RuleOutput((f,), (rec,))


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
