"""The outlier step: one step far longer than the others that did not recur, what took its extra time, and what
to change.

The step time counts it like every step; the typical step (``JobFacts.typical_step_us``) leaves it out, so the
verdict and the stage shares speak of the job's usual step, and this rule speaks of the outlier. Its extra time
(over the typical step, on every GPU of the job: the ranks wait for the slowest) is set against the run's GPU
time, the share the cost model prices.
A checkpoint save gets ``async_checkpoint``; any other cause ``smooth_steps``, worded by what took the time.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuscope.analyzers.diagnosis import codes
from gpuscope.analyzers.diagnosis.context import RuleOutput, finding, severity
from gpuscope.model.diagnosis import JobFacts, OutlierStep, Recommendation
from gpuscope.model.rank import RankReport

ADVICE_MIN = 0.05
"""Advice when the outliers' extra time is at least 5% of the run's GPU time (the TensorBoard plugin's threshold
for DataLoader advice): below that a one-off step costs less than run-to-run noise."""
CHECKPOINT_RECOVERY = 0.75
"""Prior: an asynchronous save still copies the state to host memory inside the step (about a quarter)."""
SMOOTH_RECOVERY = 0.5
"""Prior: moving one-off work off the step, or making it rarer, removes about half of it."""


def outlier_share(ranks: Sequence[RankReport], outliers: Sequence[OutlierStep]) -> float | None:
    """The outliers' extra time on every GPU of the job, over the run's GPU time (each rank's window on its GPUs);
    for a CPU job's ranks (no GPU), on every rank's process over the ranks' time."""
    run_us = sum(r.window_us * _units(r) for r in ranks)
    if not outliers or run_us <= 0:
        return None
    units = sum(_units(r) for r in ranks)
    return min(1.0, sum(max(o.extra_us, 0.0) for o in outliers) * units / run_us)


def _units(r: RankReport) -> int:
    """What a rank's time is counted on: its GPUs, or its one process where it used none."""
    return r.gpu_count if r.gpu_count > 0 else 1


def apply(ranks: Sequence[RankReport], outliers: Sequence[OutlierStep], facts: JobFacts) -> RuleOutput:
    """The finding (and, when it matters, the advice) for the job's outlier steps."""
    share = outlier_share(ranks, outliers)
    if share is None or facts.typical_step_us is None:
        return RuleOutput()
    worst = max(outliers, key=lambda o: o.extra_us)
    recs = [_recommendation(outliers, worst, share)] if share >= ADVICE_MIN else []
    per_step = worst.extra_us / facts.steady_steps if facts.steady_steps else None
    title = (f"Of {facts.steady_steps} steady steps, step {worst.step} was an outlier: {_ms(worst.time_us)} against "
             f"a typical {_ms(facts.typical_step_us)}, in {worst.cause}; it did not recur, so the stage shares "
             f"leave it out, and the step time counts it"
             + (f" (+{_ms(per_step)} a step on average over these steps)" if per_step is not None else ""))
    evidence: dict[str, float | int | str | None] = {
        "outlier_step_count": len(outliers),
        "steps": ", ".join(str(o.step) for o in outliers),
        "outlier_extra_per_window_us": facts.outlier_extra_us,
        "outlier_extra_run_share": share,
        "step_time_median_us": facts.step_time_median_us,
        "step_time_spread_us": facts.step_time_spread_us,
        "outlier_threshold_us": facts.outlier_threshold_us,
    }
    sev = severity(share, warning=ADVICE_MIN, critical=0.20)
    return RuleOutput((finding(codes.STEP_OUTLIERS, sev, title, evidence, share=share, recs=recs, stage=worst.stage,
                               rank=worst.rank if len({o.rank for o in outliers}) == 1 else None),), tuple(recs))


def _recommendation(outliers: Sequence[OutlierStep], worst: OutlierStep, share: float) -> Recommendation:
    saves = [o for o in outliers if any(_is_checkpoint(n) for n in o.ranges)]
    if saves:
        o = max(saves, key=lambda x: x.extra_us)
        name = next(n for n in o.ranges if _is_checkpoint(n))
        return Recommendation(
            codes.ASYNC_CHECKPOINT, "Save checkpoints off the training step",
            f"Step {o.step} spent {_ms(o.extra_us)} more than a typical step in {name}. Save asynchronously "
            "(torch.distributed.checkpoint.async_save, or a background thread that writes a CPU copy of the "
            "state_dict) so training goes on while the file is written, and save no more often than a failure "
            "would cost.", share * CHECKPOINT_RECOVERY,
            _reasoning(share, CHECKPOINT_RECOVERY, "an asynchronous save still copies the state to host memory in "
                       "the step"), saving_basis="run")
    return Recommendation(codes.SMOOTH_STEPS, "Take the one-off work out of the slow steps", _smooth_detail(worst),
                          share * SMOOTH_RECOVERY,
                          _reasoning(share, SMOOTH_RECOVERY, "moving one-off work off the step, or making it rarer, "
                                     "removes about half"), saving_basis="run")


def _smooth_detail(o: OutlierStep) -> str:
    what = f"Step {o.step} took {_ms(o.extra_us)} more than a typical step"
    if o.stage == "data_loading":
        return (f"{what} waiting for a batch: raise prefetch_factor and num_workers so the queue absorbs a slow "
                "batch (a slow file, a large sample).")
    if o.stage == "communication":
        return (f"{what} in collectives, waiting for another rank: see what the slowest rank did in that step "
                "(an outlier of its own, or a checkpoint it alone writes).")
    if not o.ranges:
        return (f"{what} outside every traced range. Python's garbage collector is a common cause: call "
                "gc.freeze() after building the model, or gc.disable() and gc.collect() every few hundred "
                "steps; else logging, evaluation or I/O in the loop. Wrap suspects in "
                "torch.profiler.record_function(...) to name them in the next trace.")
    return (f"{what} in {o.ranges[0]}: if it is periodic work (evaluation, logging, metrics), run it less often or "
            "off the training thread; if not, look at that step in the trace (`gpuscope timeline`).")


def _reasoning(share: float, recovery: float, why: str) -> str:
    return (f"The outlier steps' time over the typical step is {share:.1%} of the run's GPU time (every GPU waits "
            f"for the slowest rank); {why}, so about {recovery:.0%} of it comes back: {share * recovery:.1%}. "
            "It recurs as often as it did in the profiled steps.")


def _is_checkpoint(name: str) -> bool:
    lower = name.lower()
    return "checkpoint" in lower or "torch.save" in lower or lower.startswith("save")


def _ms(us: float) -> str:
    return f"{us / 1000:.1f} ms" if us < 1e6 else f"{us / 1e6:.2f} s"
