"""The expected-saving model: what fraction of the step a recommendation should save, and why.

Shares are fractions of the mean step. A stall (data loading, host, communication) can at most
give back its own share; how much of it comes back depends on what the step runs into next.
docs/diagnosis.md explains each model and how close it lands on the resnet50 before/after pair.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gpuscope.model.diagnosis import Recommendation, Stage

WORKER_CONTENTION = 0.2
"""Expected slow-down of the main process's own host work once DataLoader workers run beside it
(decode and augmentation in the workers compete for cores, memory bandwidth and the GIL-free parts of
the launch path). Set from the one real before/after pair there is (resnet50 num_workers 0 -> 4, where
the main process's non-DataLoader time grew by about a fifth); docs/diagnosis.md says so."""
AMP_SPEEDUP = 2.0
"""Conservative speed-up of tensor-core eligible kernels under fp16/bf16 autocast (convolutions and
GEMMs; the tensor-core peak is higher but normalisation and memory-bound layers limit it)."""
TF32_SPEEDUP = 1.5


@dataclass(frozen=True)
class Saving:
    """An expected saving (fraction of step time, 0..1) and how it was derived."""

    fraction: float
    reasoning: str


def _clamp(x: float, hi: float = 1.0) -> float:
    return min(max(x, 0.0), hi)


def more_workers(dataloader_share: float, gpu_share: float, *, contention: float = WORKER_CONTENTION) -> Saving:
    """Moving loading from the main process into DataLoader workers.

    The loader then runs beside the step, so the step becomes the longer of the GPU's work and the
    main process's remaining host work, which workers slow down by ``contention``:
    ``after = max(gpu, (1 - dataloader) * (1 + contention))``; saving = 1 - after, at most the DataLoader share.
    """
    after = max(gpu_share, (1.0 - dataloader_share) * (1.0 + contention))
    fraction = _clamp(1.0 - after, dataloader_share)
    return Saving(fraction, (
        f"The DataLoader holds {dataloader_share:.1%} of the step. With workers it overlaps the step, which then "
        f"takes the longer of the GPU work ({gpu_share:.1%} of today's step) and the rest of the host work "
        f"({1 - dataloader_share:.1%}) slowed {contention:.0%} by the workers' CPU use: "
        f"max({gpu_share:.3f}, {1 - dataloader_share:.3f} x {1 + contention:.2f}) = {after:.3f} of today's step."))


def share_of(share: float, realisable: float, what: str, why: str) -> Saving:
    """A stated part of a measured share: ``share * realisable``."""
    fraction = _clamp(share * realisable, share)
    return Saving(fraction, f"{what} is {share:.1%} of the step; {why}, so about {realisable:.0%} of it "
                            f"comes back: {fraction:.1%}.")


def faster_kernels(kernel_share: float, eligible_share: float, speedup: float, what: str) -> Saving:
    """Kernels that get ``speedup`` faster: saving = kernel share x eligible share x (1 - 1/speedup)."""
    fraction = _clamp(kernel_share * eligible_share * (1.0 - 1.0 / speedup), kernel_share)
    return Saving(fraction, (
        f"Kernels fill {kernel_share:.1%} of the step and {eligible_share:.0%} of kernel time could run "
        f"{what}; at a {speedup:.1f}x speed-up on those: {kernel_share:.3f} x {eligible_share:.2f} x "
        f"(1 - 1/{speedup:.1f}) = {fraction:.1%}."))


def combined(savings: Sequence[float]) -> float:
    """The saving of several changes applied together: each saves its fraction of what is left."""
    left = 1.0
    for x in savings:
        left *= 1.0 - x
    return 1.0 - left


def cap_stacked(recs: Sequence[Recommendation], stage_shares: Mapping[Stage, float | None]
                ) -> tuple[Recommendation, ...]:
    """Scale each stage's savings by one factor so that applied together they stay within its share.

    Each saving stays what the change alone should save unless the stage's changes together,
    1 - prod(1 - s), would give back more than the stage takes; then all shrink by the same factor
    (found by bisection) until they fit exactly.
    """
    by_stage: dict[Stage | None, list[int]] = defaultdict(list)
    for i, rec in enumerate(recs):
        if rec.est_step_saving is not None:
            by_stage[rec.stage].append(i)
    out = list(recs)
    for stage, idx in by_stage.items():
        share = stage_shares.get(stage) if stage is not None else None
        cap = 1.0 if share is None else share
        values = [recs[i].est_step_saving or 0.0 for i in idx]
        if combined(values) <= cap + 1e-12:
            continue
        factor = _fit(values, cap)
        for i, v in zip(idx, values):
            out[i] = replace(recs[i], est_step_saving=v * factor, reasoning=(
                f"{recs[i].reasoning} Applied together, this stage's changes would give back more than its "
                f"{cap:.1%} share of the step, so each estimate is scaled by {factor:.2f}: {v * factor:.1%} for "
                "this one."))
    return tuple(out)


def _fit(values: Sequence[float], cap: float) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if combined([v * mid for v in values]) > cap:
            hi = mid
        else:
            lo = mid
    return lo
