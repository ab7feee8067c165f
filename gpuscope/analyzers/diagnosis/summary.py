"""The verdict in one sentence a newcomer can read: the stage, its share of the step, and its cause."""

from __future__ import annotations

from gpuscope.analyzers.diagnosis.context import Context
from gpuscope.analyzers.diagnosis.stages import STALLS
from gpuscope.model.diagnosis import Stage


def _ms(us: float | None) -> str:
    """The typical step the stage shares are of, named so."""
    if us is None:
        return "the window (no profiler steps)"
    return f"the typical {us / 1000:.1f} ms step" if us < 1e6 else f"the typical {us / 1e6:.2f} s step"


def _pct(x: float) -> str:
    """Percent for a sentence: whole percents, but never a rounded-up 100% or down 0%."""
    return f"{x:.1%}" if 0.99 < x < 1.0 or 0.0 < x < 0.01 else f"{x:.0%}"


NO_GPU = "No GPU was seen in this run (none recorded, no GPU samples), so there is no GPU advice."
CPU_JOB = ("A CPU job: its trace records no GPU activity (no kernel, copy or CUDA/HIP call), so there is no GPU "
           "advice.")


def no_gpu_sentence(*, live: bool) -> str:
    """What a run without a GPU is told first: a live run saw none; a trace-only run is a CPU job."""
    return NO_GPU if live else CPU_JOB


def summary(ctx: Context, primary: Stage, why: str) -> str:
    """One sentence: what holds the GPU back and by how much; and the one call that fills the window, where one
    does."""
    if ctx.no_gpu:
        return _host_only(ctx, primary, why)
    filling = filling_call_sentence(ctx)
    return _stage_sentence(ctx, primary, why) + (f" {filling}" if filling else "")


GPU_SIDE = "GPU-side wait: queued, unrecorded, or another process"
"""The cause's name, as the verdict, the findings and the views say it."""


def filling_call_sentence(ctx: Context) -> str | None:
    """"One hipMemcpyWithStream call of 463.1 ms fills 98% of the step.": the largest call that fills half of a
    rank's steady window or more (``RankReport.filling_call``); None where no call does."""
    calls = [(r.filling_call, r) for r in ctx.ranks if r.filling_call is not None]
    if not calls:
        return None
    call, r = max(calls, key=lambda c: (c[0].share, c[0].duration_us))
    where = "the step" if r.steps == 1 else "the steady window" if r.steps == 0 else f"the {r.steps} steps"
    rank = f" on rank {r.rank}" if len(ctx.ranks) > 1 else ""
    return (f"One {call.name} call of {_duration(call.duration_us)} fills {_pct(call.share)} of {where}{rank}: the "
            "host sat in it.")


def _duration(us: float) -> str:
    return f"{us / 1e6:.2f} s" if us >= 1e6 else f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def _stage_sentence(ctx: Context, primary: Stage, why: str) -> str:
    share = ctx.shares.get(primary)
    step = _ms(ctx.typical_step_us)
    ranks = f" (over {len(ctx.ranks)} ranks)" if len(ctx.ranks) > 1 else ""
    if primary == "data_loading":
        return (f"The GPU waits for input data: {_pct(share)} of {step}{ranks} is spent in the DataLoader while the "
                f"GPU has nothing to run; {why}.")
    if primary == "host_overhead":
        return (f"The GPU waits for the CPU: for {_pct(share)} of {step}{ranks} the host process is busy in "
                "Python, kernel launches or syncs while the GPU sits idle.")
    if primary == "communication":
        text = (f"Communication holds the GPUs back: {_pct(share)} of {step}{ranks} is spent in "
                f"{ctx.words.collectives} collectives (or waiting on them) that no computation hides")
        s = ctx.straggler
        if s is not None:
            text += (f", much of it waiting for rank {s.rank}, which reaches the collectives last "
                     f"({s.mean_wait_us / 1000:.1f} ms per step on average)")
        return text + "."
    if primary == "memory":
        if ctx.shares.sources and "dcgm" in ctx.shares.sources and not ctx.evidence:
            return (f"Memory bandwidth holds the GPU back: for {_pct(share)} of the time its kernels wait on DRAM "
                    "while the compute units stay mostly unused.")
        return (f"Memory traffic holds the GPU back: host-device copies take {_pct(share)} of {step}{ranks} while "
                "the GPU computes nothing.")
    if primary == "idle":
        shared = [g for g in (ctx.live.gpus if ctx.live is not None else ()) if g.busy_source == "own_sm"]
        if shared:
            return (f"This job leaves its GPU unused: none of its own kernels run {_pct(share)} of the time it holds "
                    "it (the GPU is shared: other processes' kernels keep it busy meanwhile).")
        side = ctx.shares.details.get("gpu_side_wait_share", 0.0)
        if side >= share / 2:
            return (f"The GPU waits on its own side, not on the host: for {_pct(side)} of {step}{ranks} it sits idle "
                    f"with work the host had already launched still queued, or with nothing on the host to blame "
                    f"({GPU_SIDE}).")
        return f"The GPU is allocated but unused: nothing runs on it {_pct(share)} of the time."
    busy = ctx.facts.gpu_busy
    busy_text = f"busy {_pct(busy)} of the time" if busy is not None else f"running kernels {_pct(share)} of the time"
    return (f"The GPU itself is the limit ({busy_text}), which is the healthy case: gains now come from making "
            f"its kernels faster (mixed precision, {ctx.words.matrix_units}, fusion).")


def _host_only(ctx: Context, primary: Stage, why: str) -> str:
    """For a target without a GPU: say so, then where its main thread spent the time."""
    share = _pct(ctx.shares.get(primary))
    where = {
        "data_loading": f"the main thread spends {share} of its time waiting on the DataLoader; {why}",
        "host_overhead": f"the main thread is busy {share} of the time in Python and torch calls",
        "communication": f"the main thread spends {share} of its time in collectives",
        "idle": f"the main thread sleeps or waits off CPU {share} of the time",
    }.get(primary, f"{primary.replace('_', ' ')} accounts for {share} of the time")
    return f"{no_gpu_sentence(live=ctx.live is not None)} On the host, {where}."



WEAK = 0.35
"""Under this confidence the verdict is worded as tentative."""
LIKELY = 0.7
"""Under this, "most likely"; at or over it, the verdict is stated flatly."""
CLOSE = 0.6
"""A runner-up holding this much of the primary's share or more makes the verdict a close call between the two."""
FEW_STEPS = 2
_WORDS: dict[Stage, str] = {
    "data_loading": "waiting for input data", "host_overhead": "waiting on the CPU (Python, launches, syncs)",
    "communication": "communication", "memory": "memory copies", "idle": "an idle GPU",
    "gpu_compute": "the GPU's own compute",
}


def hedged(ctx: Context, primary: Stage, confidence: float, samples: int, sentence: str) -> str:
    """The verdict's sentence worded by its confidence: stated flatly when confident; otherwise a close call
    naming both causes with their shares, or "most likely" / "tentatively"; and few profiled steps said first."""
    few = _few_steps(ctx) if 0 < samples <= FEW_STEPS else ""
    if confidence >= LIKELY:
        return few + sentence
    share = ctx.shares.get(primary)
    others = sorted((st for st in STALLS if st != primary and ctx.shares.get(st) > 0),
                    key=lambda st: -ctx.shares.get(st))
    if others and share > 0 and ctx.shares.get(others[0]) >= CLOSE * share:
        runner = others[0]
        return (few + f"A close call between {_word(ctx, primary)} ({_pct(share)}) and {_word(ctx, runner)} "
                f"({_pct(ctx.shares.get(runner))}); both are covered below. {sentence}")
    lead = "Most likely, " if confidence >= WEAK else "Tentatively (a weak signal), "
    return few + lead + sentence[:1].lower() + sentence[1:]


def _few_steps(ctx: Context) -> str:
    """What the verdict stands on, said first when it is little: the job's profiled steps (most of any rank's,
    start-up left out), or a window without any."""
    steps = max((sum(1 for s in r.per_step if not s.warmup) for r in ctx.ranks), default=0)
    if steps == 0:
        return "From a trace without profiler steps (profile a few steps for a firmer answer): "
    return f"From {steps} profiled step{'s' if steps != 1 else ''} only (profile more for a firmer answer): "


def _word(ctx: Context, stage: Stage) -> str:
    """The stage in a few words; the idle stage as the GPU-side wait when that is most of it."""
    if stage == "idle" and ctx.shares.details.get("gpu_side_wait_share", 0.0) >= ctx.shares.get("idle") / 2:
        return "a GPU-side wait"
    return _WORDS[stage]
