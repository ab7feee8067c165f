"""What the trace says about itself: start-up inside it, and host and GPU clocks that disagree.

The figures of the verdict leave warm-up out (see analyzers/trace/startup.py); this rule tells the user it was
there, so a trace of the first steps is not mistaken for the job, and how to record the steady state.
When GPU work starts before the host call that launched it, the two clocks disagree: the figures that
join host and GPU time (launch delay, host-wait idle) are left out, and this rule says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuscope.analyzers.advice.vendor import Words, job_vendor, words
from gpuscope.analyzers.diagnosis import codes
from gpuscope.analyzers.diagnosis.context import Context, RuleOutput, finding
from gpuscope.analyzers.trace.onetime import CAPTURE
from gpuscope.model.diagnosis import Finding, Recommendation
from gpuscope.model.rank import RankReport

SCHEDULE = ("torch.profiler.profile(schedule=torch.profiler.schedule(wait=5, warmup=2, active=3), ...) and "
            "call prof.step() once per iteration (gpuscope.torch.profile_steps does this); under Nsight Systems, "
            "nsys profile --capture-range=cudaProfilerApi with torch.cuda.profiler.start() and stop() around the "
            "steady iterations")


def apply(ctx: Context) -> RuleOutput:
    out = RuleOutput()
    f = startup_finding(ctx.ranks)
    if f is not None:
        out += RuleOutput((f,), (schedule_recommendation(ctx.words),))
    skewed = [r for r in ctx.ranks if r.clock_skew_us is not None]
    if skewed:
        worst = max(skewed, key=lambda r: r.clock_skew_us or 0.0)
        out += RuleOutput((finding(
            codes.CLOCK_SKEW, "warning",
            f"Host and GPU clocks disagree: GPU work starts up to {_ms(worst.clock_skew_us or 0.0)} before the "
            "call that launched it; launch delays and host-wait idle are left out",
            {"clock_skew_us": worst.clock_skew_us, "ranks_skewed": len(skewed)},
            rank=worst.rank if len(ctx.ranks) > 1 else None),),)
    return out


def startup_finding(ranks: Sequence[RankReport]) -> Finding | None:
    """The start-up of the worst rank: how long, in what, and whether any steady state is left."""
    with_startup = [r for r in ranks if r.startup is not None]
    if not with_startup:
        return None
    r = max(with_startup, key=lambda x: x.startup.duration_us if x.startup else 0.0)
    s = r.startup
    assert s is not None
    w = words(job_vendor(ranks))
    parts = ", ".join(f"{_part(k, w)} {_ms(v)}" for k, v in sorted(s.parts_us.items(), key=lambda kv: -kv[1]))
    calls = f" (in {', '.join(s.calls[:3])})" if s.calls else ""
    only = all(x.startup is not None and not x.startup.steady for x in ranks)
    share = s.duration_us / r.window_us if r.window_us else None
    if only:
        title = (f"The trace holds start-up only: {parts}{calls} in its {_ms(r.window_us)} window; no steady step "
                 "to judge")
    elif s.warmup_steps:
        title = (f"{s.warmup_steps} warm-up step{'s' if s.warmup_steps > 1 else ''} left out of the figures: "
                 f"{parts}{calls}")
    else:
        title = f"One-time start-up in the trace, left out of the figures: {parts}{calls}"
    evidence: dict[str, float | int | str | None] = {
        "startup_per_window_us": s.duration_us, "startup_share": share, "warmup_steps": s.warmup_steps,
        **{f"{k.split()[0].lower().replace('/', '_').replace('-', '_').replace('.', '_')}_us": v
           for k, v in s.parts_us.items()},
    }
    return finding(codes.STARTUP_IN_TRACE, "warning" if only else "info", title, evidence, share=share,
                   recs=[schedule_recommendation(w)], rank=r.rank if len(ranks) > 1 else None)


def schedule_recommendation(w: Words) -> Recommendation:
    """Record after start-up, naming the start-up of the job's vendor (``w``)."""
    return Recommendation(
        codes.PROFILER_SCHEDULE, "Profile the steady state, after start-up",
        f"Skip the first iterations before recording: {SCHEDULE}. Lazy {w.runtime} initialisation, "
        f"{w.collectives} communicator init, {w.kernel_tuning}, torch.compile and {w.graph_capture} then fall in "
        "the skipped steps.",
        None, "A measurement fix: it saves no step time, it makes the other figures the job's own.")


def _part(name: str, w: Words) -> str:
    """A start-up part as the job's vendor calls it (the part's key stays the same in every report)."""
    return w.graph_capture if name == CAPTURE else name


def _ms(us: float) -> str:
    if us < 1000:
        return f"{us:.0f} µs"
    return f"{us / 1000:.1f} ms" if us < 1e6 else f"{us / 1e6:.2f} s"
